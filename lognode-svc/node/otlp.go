package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/loamhq/loam/lognode-svc/httpapi"
	"github.com/loamhq/loam/lognode-svc/otlp"
	"github.com/loamhq/loam/lognode-svc/writer"
)

// otlpListeners are the node's OTLP ingest transports (either may be absent).
type otlpListeners struct {
	srv  *otlp.Server
	hln  net.Listener // OTLP/HTTP; nil: not served
	hsrv *http.Server
	gln  net.Listener // OTLP/gRPC; nil: not served
	gsrv *grpc.Server
}

// startOTLP opens the OTLP listeners of cfg (none when cfg names neither).
func startOTLP(cfg Config, api *httpapi.Server, writers map[string]writer.Writer, reg *prometheus.Registry, log *slog.Logger) (otlpListeners, error) {
	var ol otlpListeners
	ol.hln, ol.gln = cfg.OTLPHTTPListener, cfg.OTLPGRPCListener
	if ol.hln == nil && ol.gln == nil && cfg.OTLPHTTPAddr == "" && cfg.OTLPGRPCAddr == "" {
		return ol, nil
	}
	srv, err := otlp.New(otlp.Config{Meta: cfg.Meta, Writers: writers, Streams: api, AdmitIngest: api.AdmitIngest,
		Limits: cfg.Limits, Settings: cfg.OTLP, Auth: cfg.Auth, Logger: log, Registry: reg, Now: cfg.Now})
	if err != nil {
		return ol, err
	}
	ol.srv = srv
	if ol.hln == nil && cfg.OTLPHTTPAddr != "" {
		if ol.hln, err = net.Listen("tcp", cfg.OTLPHTTPAddr); err != nil {
			return ol, fmt.Errorf("node: listen %s (OTLP/HTTP): %w", cfg.OTLPHTTPAddr, err)
		}
	}
	if ol.gln == nil && cfg.OTLPGRPCAddr != "" {
		if ol.gln, err = net.Listen("tcp", cfg.OTLPGRPCAddr); err != nil {
			ol.close()
			return ol, fmt.Errorf("node: listen %s (OTLP/gRPC): %w", cfg.OTLPGRPCAddr, err)
		}
	}
	if ol.hln != nil {
		ol.hsrv = &http.Server{Handler: srv.HTTPHandler(), ReadHeaderTimeout: cfg.Limits.ReadHeaderTimeout, ReadTimeout: cfg.Limits.ReadTimeout,
			WriteTimeout: cfg.Limits.WriteTimeout, IdleTimeout: cfg.Limits.IdleTimeout,
			ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
		if cfg.TLS != nil {
			ol.hsrv.TLSConfig = cfg.TLS.ServerConfig()
		}
	}
	if ol.gln != nil {
		var gopts []grpc.ServerOption
		if cfg.TLS != nil {
			gopts = append(gopts, grpc.Creds(cfg.TLS.ServerCredentials()))
		}
		ol.gsrv = srv.NewGRPCServer(gopts...)
	}
	return ol, nil
}

// close closes listeners that were opened but not served (a failed Start).
func (ol *otlpListeners) close() {
	if ol.hln != nil {
		ol.hln.Close()
	}
	if ol.gln != nil {
		ol.gln.Close()
	}
}

// serveOTLP serves the OTLP listeners until Close.
func (n *Node) serveOTLP(log *slog.Logger) {
	ol := &n.otlp
	if ol.hsrv != nil {
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			var err error
			if n.cfg.TLS != nil {
				err = ol.hsrv.ServeTLS(ol.hln, "", "")
			} else {
				err = ol.hsrv.Serve(ol.hln)
			}
			if err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("OTLP/HTTP server stopped", "err", err)
			}
		}()
		log.Info("serving OTLP/HTTP", "addr", ol.hln.Addr().String(), "tls", n.cfg.TLS != nil)
	}
	if ol.gsrv != nil {
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			if err := ol.gsrv.Serve(ol.gln); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
				log.Error("OTLP/gRPC server stopped", "err", err)
			}
		}()
		log.Info("serving OTLP/gRPC", "addr", ol.gln.Addr().String(), "tls", n.cfg.TLS != nil)
	}
}

// shutdown starts stopping the OTLP transports: they take no new requests and those in
// flight finish (their writes still commit: the writers drain after). The function it
// returns waits until they are stopped, or until ctx ends (then cuts what is still open).
func (ol *otlpListeners) shutdown(ctx context.Context) func() error {
	gstopped := make(chan struct{})
	if ol.gsrv != nil {
		go func() {
			ol.gsrv.GracefulStop()
			close(gstopped)
		}()
	} else {
		close(gstopped)
	}
	herr := make(chan error, 1)
	if ol.hsrv != nil {
		go func() { herr <- ol.hsrv.Shutdown(ctx) }()
	} else {
		herr <- nil
	}
	return func() error {
		err := <-herr
		select {
		case <-gstopped:
		case <-ctx.Done():
			if ol.gsrv != nil {
				ol.gsrv.Stop() // calls still open past the deadline are cut
			}
			<-gstopped
		}
		return err
	}
}

// OTLPHTTPAddr is the OTLP/HTTP address, or "" when the node serves none.
func (n *Node) OTLPHTTPAddr() string {
	if n.otlp.hsrv == nil {
		return ""
	}
	return n.otlp.hln.Addr().String()
}

// OTLPGRPCAddr is the OTLP/gRPC address, or "" when the node serves none.
func (n *Node) OTLPGRPCAddr() string {
	if n.otlp.gsrv == nil {
		return ""
	}
	return n.otlp.gln.Addr().String()
}
