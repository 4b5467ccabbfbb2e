package journal

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// Mux is one TCP listener carrying the Raft traffic of every journal member of a log
// node. A connection starts with a header naming its journal: one byte n (1..255) and n
// bytes of journal id. A member's Raft address is "host:port/journal" (MemberAddr). With
// TLS (ListenMuxTLS) every connection is TLS from its first byte, the header inside it.
type Mux struct {
	ln        net.Listener
	advertise string
	serverTLS *tls.Config // nil: plaintext
	clientTLS *tls.Config
	mu        sync.Mutex
	layers    map[string]*layer
	closed    bool
	wg        sync.WaitGroup
}

// headerTimeout bounds how long an accepted connection may take to name its journal.
const headerTimeout = 10 * time.Second

// ListenMux listens on addr (host:port; port 0 picks one). advertise is the host:port
// other members dial ("" : the listener's address).
func ListenMux(addr, advertise string) (*Mux, error) { return ListenMuxTLS(addr, advertise, nil, nil) }

// ListenMuxTLS is ListenMux with TLS: server is what the listener serves (the cluster
// identity, requiring a client certificate of the cluster CA), client what its
// connections to other muxes present and verify. Both nil: plaintext.
func ListenMuxTLS(addr, advertise string, server, client *tls.Config) (*Mux, error) {
	if (server == nil) != (client == nil) {
		return nil, errors.New("journal: mux TLS needs both the server and the client configuration")
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("journal: raft listen %s: %w", addr, err)
	}
	if advertise == "" {
		advertise = ln.Addr().String()
	}
	if _, _, err := net.SplitHostPort(advertise); err != nil {
		ln.Close()
		return nil, fmt.Errorf("journal: raft advertise address %q: %w", advertise, err)
	}
	m := &Mux{ln: ln, advertise: advertise, layers: map[string]*layer{}, serverTLS: server, clientTLS: client}
	m.wg.Add(1)
	go m.accept()
	return m, nil
}

// Addr is the advertised host:port.
func (m *Mux) Addr() string { return m.advertise }

// MemberAddr is the Raft address of journal's member on this mux.
func (m *Mux) MemberAddr(journal string) raft.ServerAddress {
	return raft.ServerAddress(m.advertise + "/" + journal)
}

// Close stops the listener and every layer.
func (m *Mux) Close() error {
	m.mu.Lock()
	m.closed = true
	ls := make([]*layer, 0, len(m.layers))
	for _, l := range m.layers {
		ls = append(ls, l)
	}
	m.mu.Unlock()
	err := m.ln.Close()
	for _, l := range ls {
		l.Close()
	}
	m.wg.Wait()
	return err
}

func (m *Mux) accept() {
	defer m.wg.Done()
	for {
		c, err := m.ln.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return
		}
		go m.route(c)
	}
}

func (m *Mux) route(c net.Conn) {
	_ = c.SetDeadline(time.Now().Add(headerTimeout))
	if m.serverTLS != nil {
		tc := tls.Server(c, m.serverTLS)
		if err := tc.Handshake(); err != nil {
			c.Close() // no identity of the cluster
			return
		}
		c = tc
	}
	var n [1]byte
	if _, err := io.ReadFull(c, n[:]); err != nil || n[0] == 0 {
		c.Close()
		return
	}
	id := make([]byte, n[0])
	if _, err := io.ReadFull(c, id); err != nil {
		c.Close()
		return
	}
	_ = c.SetDeadline(time.Time{})
	m.mu.Lock()
	l := m.layers[string(id)]
	m.mu.Unlock()
	if l == nil {
		c.Close() // no member of that journal here (yet): the dialer retries
		return
	}
	select {
	case l.conns <- c:
	case <-l.done:
		c.Close()
	}
}

// Layer registers journal's stream layer, for raft.NewNetworkTransport. Names starting
// with '_' are the node's own services on the mux (forwardService), never journals.
func (m *Mux) Layer(journal string) (raft.StreamLayer, error) {
	if err := checkJournalID(journal); err != nil {
		return nil, err
	}
	return m.layer(journal)
}

func (m *Mux) layer(journal string) (*layer, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, fmt.Errorf("journal: mux %s is closed", m.advertise)
	}
	if m.layers[journal] != nil {
		return nil, fmt.Errorf("journal: a member of journal %q already listens on %s", journal, m.advertise)
	}
	l := &layer{m: m, journal: journal, conns: make(chan net.Conn, 16), done: make(chan struct{})}
	m.layers[journal] = l
	return l, nil
}

func checkJournalID(id string) error {
	if id == "" || len(id) > 255 || strings.ContainsAny(id, "/ \t\r\n") || id[0] == '_' {
		return fmt.Errorf("journal: journal id %q: want 1 to 255 bytes without '/' or spaces, not starting with '_'", id)
	}
	return nil
}

// dial connects to the mux at hostport for service (a journal id or a '_' service), over
// TLS when m has it.
func (m *Mux) dial(ctx context.Context, hostport, service string, timeout time.Duration) (net.Conn, error) {
	d := net.Dialer{Timeout: timeout}
	c, err := d.DialContext(ctx, "tcp", hostport)
	if err != nil {
		return nil, err
	}
	_ = c.SetDeadline(time.Now().Add(timeout))
	if m.clientTLS != nil {
		tc := tls.Client(c, m.clientTLS)
		if err := tc.HandshakeContext(ctx); err != nil {
			c.Close()
			return nil, fmt.Errorf("journal: TLS to %s: %w", hostport, err)
		}
		c = tc
	}
	hdr := append([]byte{byte(len(service))}, service...)
	if _, err := c.Write(hdr); err != nil {
		c.Close()
		return nil, err
	}
	_ = c.SetDeadline(time.Time{})
	return c, nil
}

// SplitMemberAddr splits a member address "host:port/journal".
func SplitMemberAddr(a raft.ServerAddress) (hostport, journal string, err error) {
	i := strings.LastIndexByte(string(a), '/')
	if i < 0 {
		return "", "", fmt.Errorf("journal: member address %q: want host:port/journal", a)
	}
	hostport, journal = string(a[:i]), string(a[i+1:])
	if _, _, err := net.SplitHostPort(hostport); err != nil {
		return "", "", fmt.Errorf("journal: member address %q: %w", a, err)
	}
	if err := checkJournalID(journal); err != nil {
		return "", "", fmt.Errorf("journal: member address %q: %w", a, err)
	}
	return hostport, journal, nil
}

type layer struct {
	m       *Mux
	journal string
	conns   chan net.Conn
	done    chan struct{}
	once    sync.Once
}

type memberAddr string

func (a memberAddr) Network() string { return "tcp" }
func (a memberAddr) String() string  { return string(a) }

func (l *layer) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *layer) Close() error {
	l.once.Do(func() {
		close(l.done)
		l.m.mu.Lock()
		if l.m.layers[l.journal] == l {
			delete(l.m.layers, l.journal)
		}
		l.m.mu.Unlock()
	})
	return nil
}

func (l *layer) Addr() net.Addr { return memberAddr(l.m.MemberAddr(l.journal)) }

func (l *layer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	hostport, journal, err := SplitMemberAddr(address)
	if err != nil {
		return nil, err
	}
	return l.m.dial(context.Background(), hostport, journal, timeout)
}
