package server

import (
	"crypto/tls"
	"fmt"
	"net"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/loamhq/loam/shared/tlsconf"
)

// tlsStream is a Raft stream layer over mutual TLS: it accepts only peers presenting a
// certificate of the cluster CA and presents this voter's certificate when it dials, so
// nothing outside the cluster can send Raft RPCs (append entries, votes, snapshots).
type tlsStream struct {
	net.Listener // a tls.Listener: the handshake, and its client check, run on first read
	advertise    net.Addr
	client       *tls.Config
}

// newTLSTransport is raft.NewTCPTransportWithLogger's transport (3 pooled connections per
// peer, 10 s I/O timeout) over tlsStream.
func newTLSTransport(bind string, advertise net.Addr, src *tlsconf.Source, logger hclog.Logger) (*raft.NetworkTransport, error) {
	ln, err := net.Listen("tcp", bind)
	if err != nil {
		return nil, err
	}
	s := &tlsStream{Listener: tls.NewListener(ln, src.ServerConfig()), advertise: advertise, client: src.ClientConfig()}
	if ta, ok := s.Addr().(*net.TCPAddr); !ok || ta.IP == nil || ta.IP.IsUnspecified() {
		ln.Close()
		return nil, fmt.Errorf("raft address %s is not advertisable (set RaftAdvertise)", s.Addr())
	}
	return raft.NewNetworkTransportWithLogger(s, 3, 10*time.Second, logger), nil
}

func (s *tlsStream) Addr() net.Addr {
	if s.advertise != nil {
		return s.advertise
	}
	return s.Listener.Addr()
}

func (s *tlsStream) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	cfg := s.client.Clone()
	if cfg.ServerName == "" {
		host, _, err := net.SplitHostPort(string(addr))
		if err != nil {
			return nil, err
		}
		cfg.ServerName = host
	}
	return tls.DialWithDialer(&net.Dialer{Timeout: timeout}, "tcp", string(addr), cfg)
}
