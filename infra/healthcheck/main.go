// Command loam-healthcheck is the container health probe shipped in the log node image. The
// runtime image (distroless) has no shell, curl or wget, so Docker's HEALTHCHECK and the ECS
// container health check run this instead:
//
//	loam-healthcheck http://127.0.0.1:8080/healthz
//
// It GETs the URL once and exits 0 when the answer is 2xx, 1 otherwise (refused connection,
// timeout, other status). Basics: one request, no retries (the orchestrator retries), a
// 3-second default timeout (-timeout). Caveats: plain HTTP to a local port only; it does not
// follow redirects, since a health endpoint that redirects is misconfigured.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
)

func main() {
	timeout := flag.Duration("timeout", 3*time.Second, "give up after this long")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: loam-healthcheck [-timeout 3s] URL")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	if err := probe(ctx, http.DefaultTransport, flag.Arg(0)); err != nil {
		fmt.Fprintln(os.Stderr, "loam-healthcheck:", err)
		os.Exit(1)
	}
}

// errUnhealthy is returned when the endpoint answers with a status other than 2xx.
var errUnhealthy = errors.New("unhealthy")

// probe GETs url once through rt and reports whether it answered 2xx.
func probe(ctx context.Context, rt http.RoundTripper, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("probe %s: %w", url, err)
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return fmt.Errorf("probe %s: %w", url, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("probe %s: status %d: %w", url, resp.StatusCode, errUnhealthy)
	}
	return nil
}
