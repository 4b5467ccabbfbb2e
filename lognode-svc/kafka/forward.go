package kafka

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// forwarder sends group requests to their coordinator: one connection per (owner address,
// API key), each serving one request at a time, at most maxForwardConns kept (the least
// recently used is closed past it).
type forwarder struct {
	s     *Server
	mu    sync.Mutex
	conns map[string]*fwdConn
	fmt   *kmsg.RequestFormatter
}

const (
	maxForwardConns = 64
	forwardTimeout  = 30 * time.Second // JoinGroup may wait a rebalance out
)

type fwdConn struct {
	mu   sync.Mutex
	c    net.Conn
	corr int32
	used time.Time
}

func newForwarder(s *Server) *forwarder {
	return &forwarder{s: s, conns: map[string]*fwdConn{}, fmt: kmsg.NewRequestFormatter(kmsg.FormatterClientID(forwardClientID))}
}

func (f *forwarder) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for k, fc := range f.conns {
		fc.c.Close()
		delete(f.conns, k)
	}
}

// forward sends req to addr (authenticating with user and key when the listener checks
// keys) and answers its response.
func (f *forwarder) forward(ctx context.Context, addr, user, key string, req kmsg.Request) (kmsg.Response, error) {
	id := addr + "\x00" + key
	f.mu.Lock()
	fc := f.conns[id]
	if fc == nil {
		if len(f.conns) >= maxForwardConns {
			var oldK string
			var old *fwdConn
			for k, c := range f.conns {
				if old == nil || c.used.Before(old.used) {
					oldK, old = k, c
				}
			}
			old.c.Close()
			delete(f.conns, oldK)
		}
		fc = &fwdConn{}
		f.conns[id] = fc
	}
	fc.used = time.Now()
	f.mu.Unlock()

	fc.mu.Lock()
	defer fc.mu.Unlock()
	if fc.c == nil {
		c, err := f.dial(ctx, addr, user, key)
		if err != nil {
			f.drop(id, fc)
			return nil, err
		}
		fc.c = c
	}
	resp, err := f.roundTrip(fc, req)
	if err != nil {
		fc.c.Close()
		fc.c = nil
		f.drop(id, fc)
	}
	return resp, err
}

func (f *forwarder) drop(id string, fc *fwdConn) {
	f.mu.Lock()
	if f.conns[id] == fc {
		delete(f.conns, id)
	}
	f.mu.Unlock()
}

func (f *forwarder) dial(ctx context.Context, addr, user, key string) (net.Conn, error) {
	d := net.Dialer{Timeout: 5 * time.Second}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if f.s.cfg.ForwardTLS != nil {
		tc := tls.Client(c, f.s.cfg.ForwardTLS.Clone())
		if err := tc.HandshakeContext(ctx); err != nil {
			c.Close()
			return nil, err
		}
		c = tc
	}
	if f.s.cfg.Auth == nil {
		return c, nil
	}
	fc := &fwdConn{c: c}
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, "PLAIN"
	r, err := f.roundTrip(fc, hs)
	if err == nil {
		if ec := r.(*kmsg.SASLHandshakeResponse).ErrorCode; ec != 0 {
			err = kerr.ErrorForCode(ec)
		}
	}
	if err == nil {
		au := kmsg.NewPtrSASLAuthenticateRequest()
		au.Version = 1
		au.SASLAuthBytes = []byte("\x00" + user + "\x00" + key)
		if r, err = f.roundTrip(fc, au); err == nil {
			if ec := r.(*kmsg.SASLAuthenticateResponse).ErrorCode; ec != 0 {
				err = kerr.ErrorForCode(ec)
			}
		}
	}
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("authenticate to %s: %w", addr, err)
	}
	return c, nil
}

func (f *forwarder) roundTrip(fc *fwdConn, req kmsg.Request) (kmsg.Response, error) {
	fc.corr++
	buf := f.fmt.AppendRequest(nil, req, fc.corr)
	fc.c.SetDeadline(time.Now().Add(forwardTimeout))
	if _, err := fc.c.Write(buf); err != nil {
		return nil, err
	}
	var size [4]byte
	if _, err := io.ReadFull(fc.c, size[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(size[:])
	if int64(n) > int64(f.s.cfg.MaxFrameBytes) || n < 4 {
		return nil, fmt.Errorf("response frame of %d bytes", n)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(fc.c, body); err != nil {
		return nil, err
	}
	rd := kbin.Reader{Src: body}
	if corr := rd.Int32(); corr != fc.corr {
		return nil, fmt.Errorf("response correlation id %d, want %d", corr, fc.corr)
	}
	resp := req.ResponseKind()
	if resp.IsFlexible() && resp.Key() != 18 {
		kmsg.SkipTags(&rd)
	}
	if err := rd.Complete(); err != nil {
		return nil, errors.New("truncated response header")
	}
	if err := resp.ReadFrom(rd.Src); err != nil {
		return nil, err
	}
	return resp, nil
}
