package coord

import "net/http"

// NewHTTPClient is NewHTTP with the HTTP client hc: a store served over HTTPS behind mutual
// TLS (the supervised `loam dev --tls`) takes one whose transport presents the caller's
// certificate and trusts the server's CA. hc's timeout bounds each call.
func NewHTTPClient(baseURL string, hc *http.Client, opts ...Option) *HTTP {
	h := NewHTTP(baseURL, opts...)
	h.client = hc
	return h
}
