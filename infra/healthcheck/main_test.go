package main

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

func TestProbe(t *testing.T) {
	status := http.StatusOK
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" {
			http.NotFound(w, r)
			return
		}
		if status == http.StatusFound {
			http.Redirect(w, r, "/elsewhere", status)
			return
		}
		w.WriteHeader(status)
	}))
	defer srv.Close()

	for _, tc := range []struct {
		name    string
		status  int
		path    string
		healthy bool
	}{
		{"ok", http.StatusOK, "/healthz", true},
		{"no content", http.StatusNoContent, "/healthz", true},
		{"unavailable", http.StatusServiceUnavailable, "/healthz", false},
		{"redirect is not followed", http.StatusFound, "/healthz", false},
		{"wrong path", http.StatusOK, "/nope", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status = tc.status
			err := probe(context.Background(), http.DefaultTransport, srv.URL+tc.path)
			if tc.healthy && err != nil {
				t.Fatalf("probe: %v, want healthy", err)
			}
			if !tc.healthy && !errors.Is(err, errUnhealthy) {
				t.Fatalf("probe: %v, want errUnhealthy", err)
			}
		})
	}
}

func TestProbeRefusedAndTimeout(t *testing.T) {
	// A port nobody listens on: take one and close it.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	if err := probe(context.Background(), http.DefaultTransport, "http://"+addr+"/healthz"); err == nil {
		t.Fatal("probe of a closed port succeeded")
	}

	block := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-block:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(block)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	err = probe(ctx, http.DefaultTransport, srv.URL+"/healthz")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("probe of a hanging server: %v, want deadline exceeded", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("probe took %v despite a 50ms deadline", d)
	}
}

func TestProbeBadURL(t *testing.T) {
	if err := probe(context.Background(), http.DefaultTransport, "://nope"); err == nil {
		t.Fatal("probe of a malformed URL succeeded")
	}
}
