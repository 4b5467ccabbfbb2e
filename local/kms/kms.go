// Package kms runs an embedded KMS on loopback for `loam dev --kms embedded` and for tests:
// nsmithuk/local-kms's request handler (the AWS KMS JSON API: CreateKey, GenerateDataKey,
// Decrypt with encryption contexts, DisableKey, ScheduleKeyDeletion, ...) on a listener
// bound to 127.0.0.1, its keys in a LevelDB under a directory. Its own binary listens on
// every interface; embedding it keeps it on loopback.
package kms

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"

	localkms "github.com/nsmithuk/local-kms/src"
	"github.com/nsmithuk/local-kms/src/config"
	"github.com/nsmithuk/local-kms/src/data"
	"github.com/sirupsen/logrus"
)

// Account and Region are what the embedded KMS puts in key ARNs.
const (
	Account = "111122223333"
	Region  = "us-east-1"
)

// one embedded KMS per process: local-kms keeps its account and region in globals.
var running sync.Mutex

// Server is a running embedded KMS.
type Server struct {
	URL  string // http://127.0.0.1:PORT, the KMS endpoint
	srv  *http.Server
	db   *data.Database
	done chan struct{}
}

// Start serves a KMS on addr (default 127.0.0.1:0) with its keys in dir. One runs per process
// at a time.
func Start(dir, addr string) (*Server, error) {
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	if !running.TryLock() {
		return nil, errors.New("kms: an embedded KMS already runs in this process")
	}
	config.AWSAccountId, config.AWSRegion, config.DatabasePath = Account, Region, dir
	logrus.SetOutput(io.Discard)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		running.Unlock()
		return nil, fmt.Errorf("kms: listen %s: %w", addr, err)
	}
	db := data.NewDatabase(dir)
	s := &Server{URL: "http://" + ln.Addr().String(), db: db, done: make(chan struct{}),
		srv: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			localkms.HandleRequest(w, r, db)
		})}}
	go func() {
		defer close(s.done)
		s.srv.Serve(ln)
	}()
	return s, nil
}

// Close stops the server and closes its database.
func (s *Server) Close() error {
	err := s.srv.Close()
	<-s.done
	s.db.Close()
	running.Unlock()
	return err
}
