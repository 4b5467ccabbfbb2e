package supervisor

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/loamhq/loam/local/devcluster"
	"github.com/loamhq/loam/shared/coord"
	"github.com/loamhq/loam/shared/meta/metagrpc"
	"github.com/loamhq/loam/shared/objstore"
	"github.com/loamhq/loam/shared/tlsconf"
)

// Subcommands of the running executable (loam) that run a voter and a log node: the
// children's command when Config names no binary.
const (
	SequencerSubcommand = "sequencer"
	LognodeSubcommand   = "lognode"
)

// CoordFile is the coordination store the supervisor serves, in the data dir.
const CoordFile = "coord.db"

// command is how a child of role runs: the given binary as it is, else the running
// executable with the role's subcommand (`loam sequencer ...`, `loam lognode ...`).
func command(given, sub string) (bin string, pre []string, how string, err error) {
	if given != "" {
		return given, nil, "given", nil
	}
	exe, err := os.Executable()
	if err != nil {
		return "", nil, "", fmt.Errorf("supervisor: the running executable, to run its %q subcommand: %w", sub, err)
	}
	return exe, []string{sub}, "this executable's " + sub + " subcommand", nil
}

// startCoord opens <dir>/coord.db and serves it with coord.Handler on Host:CoordPort
// (loopback when Host is a wildcard), over mutual TLS with Config.TLS. Only this process
// opens the bbolt file; the log nodes reach it over HTTP(S).
func (s *Supervisor) startCoord() error {
	if s.cfg.CoordPort < 0 {
		return nil
	}
	store, err := coord.NewBolt(filepath.Join(s.dir, CoordFile))
	if err != nil {
		return fmt.Errorf("supervisor: coordination store: %w", err)
	}
	// The store is unauthenticated: with a wildcard Host it stays on loopback, which every
	// child of this machine reaches.
	host := s.cfg.Host
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, fmt.Sprint(s.cfg.CoordPort)))
	if err != nil {
		store.Close()
		return fmt.Errorf("supervisor: coordination store listener: %w", err)
	}
	scheme := "http"
	if s.cfg.TLS != nil {
		// Mutual TLS: only holders of a certificate of the CA (the children) get in.
		src, err := s.coordTLS(host)
		if err != nil {
			ln.Close()
			store.Close()
			return err
		}
		ln, scheme = tls.NewListener(ln, src.ServerConfig()), "https"
	}
	s.coordStore = store
	s.coordURL = scheme + "://" + ln.Addr().String()
	s.coordSrv = &http.Server{Handler: coord.Handler(store), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := s.coordSrv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.cfg.Logger.Error("coordination store server", "err", err)
		}
	}()
	return nil
}

// coordTLS is the coordination store server's identity: its own certificate of the CA,
// requiring one of the CA from every caller.
func (s *Supervisor) coordTLS(host string) (*tlsconf.Source, error) {
	cert, key, err := s.issueCert(&child{id: "supervisor"}, host)
	if err != nil {
		return nil, err
	}
	src, err := tlsconf.Load(tlsconf.Config{CertFile: cert, KeyFile: key, CAFile: s.cfg.TLS.CA})
	if err != nil {
		return nil, fmt.Errorf("supervisor: tls: coordination store: %w", err)
	}
	return src, nil
}

// CoordURL is the coordination store the log nodes are given (--coord), or "" for none.
func (s *Supervisor) CoordURL() string { return s.coordURL }

// startFunctions runs the background functions in this process against the bucket, the
// voters and the coordination store.
func (s *Supervisor) startFunctions(ctx context.Context, rpcs []string) error {
	if s.cfg.Functions == nil {
		return nil
	}
	if s.coordStore == nil {
		return fmt.Errorf("%w: the background functions need the coordination store (CoordPort -1)", ErrConfig)
	}
	var b objstore.Bucket
	b, err := objstore.Open(ctx, s.cfg.Bucket)
	if err != nil {
		return fmt.Errorf("supervisor: functions: bucket: %w", err)
	}
	if len(s.cfg.ExpressBuckets) > 0 {
		e, err := objstore.OpenExpress(ctx, s.cfg.ExpressBuckets, s.cfg.ExpressZones, "")
		if err != nil {
			b.Close()
			return fmt.Errorf("supervisor: functions: express buckets: %w", err)
		}
		if b, err = objstore.NewRouted(b, e); err != nil {
			e.Close()
			return fmt.Errorf("supervisor: functions: express buckets: %w", err)
		}
	}
	mc, err := metagrpc.Dial(ctx, rpcs, s.metaOpts()...)
	if err != nil {
		b.Close()
		return fmt.Errorf("supervisor: functions: sequencer: %w", err)
	}
	fns, err := devcluster.StartFunctions(b, mc, s.coordStore, *s.cfg.Functions, s.cfg.Logger)
	if err != nil {
		mc.Close()
		b.Close()
		return fmt.Errorf("supervisor: functions: %w", err)
	}
	s.fnBucket, s.fnMeta, s.fns = b, mc, fns
	return nil
}

// closeFunctions stops the functions and closes their bucket and sequencer client.
func (s *Supervisor) closeFunctions() error {
	var errs []error
	if s.fns != nil {
		s.fns.Close()
	}
	if s.fnMeta != nil {
		errs = append(errs, s.fnMeta.Close())
	}
	if s.fnBucket != nil {
		errs = append(errs, s.fnBucket.Close())
	}
	return errors.Join(errs...)
}

// closeCoord stops serving the coordination store and closes it (after the children).
func (s *Supervisor) closeCoord() error {
	var errs []error
	if s.coordSrv != nil {
		errs = append(errs, s.coordSrv.Close())
	}
	if s.coordStore != nil {
		errs = append(errs, s.coordStore.Close())
	}
	return errors.Join(errs...)
}

// metaOpts are the options of the supervisor's own calls to the voters: with TLS, the
// CA's client certificate (the cluster identity).
func (s *Supervisor) metaOpts() []metagrpc.Option {
	if s.clusterID == nil {
		return nil
	}
	return []metagrpc.Option{metagrpc.WithTransportCredentials(s.clusterID.ClientCredentials())}
}

// issueCert gives child c its own certificate of the CA, for its host.
func (s *Supervisor) issueCert(c *child, host string) (cert, key string, err error) {
	dir := filepath.Join(s.dir, "tls")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", "", fmt.Errorf("supervisor: tls: %w", err)
	}
	cert, key = filepath.Join(dir, c.id+".pem"), filepath.Join(dir, c.id+"-key.pem")
	hosts := []string{host}
	if host != s.cfg.Host {
		hosts = append(hosts, s.cfg.Host)
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		if name, err := os.Hostname(); err == nil {
			hosts = append(hosts, name)
		}
	}
	if err := s.cfg.TLS.Issue(cert, key, "loam dev "+c.id, hosts); err != nil {
		return "", "", fmt.Errorf("supervisor: tls: %s: %w", c.id, err)
	}
	return cert, key, nil
}

// httpsReady is Config.Ready with TLS: GET https://addr/healthz, trusting only the CA,
// answers 200.
func httpsReady(caFile string) (func(ctx context.Context, addr string) bool, error) {
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("supervisor: tls: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("supervisor: tls: %s holds no PEM certificate", caFile)
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	return func(ctx context.Context, addr string) bool { return probe(ctx, client, "https://"+addr+"/healthz") }, nil
}

func probe(ctx context.Context, client *http.Client, url string) bool {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := client.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// childEnv is env without the variables named in drop.
func childEnv(env, drop []string) []string {
	if len(drop) == 0 {
		return env
	}
	out := make([]string, 0, len(env))
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if !slices.Contains(drop, name) {
			out = append(out, kv)
		}
	}
	return out
}
