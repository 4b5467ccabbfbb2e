package httpapi

import (
	_ "embed"
	"net/http"
	"slices"
)

// The OpenAPI 3.1 document of every route, served at GET /v1/openapi.json. openapi.json
// is the one place a route is documented: its paths, request and answer bodies (the record
// JSON, the error body, the binary content type). TestOpenAPIMatchesRoutes fails when a
// route registered in New is missing from it, or it documents a route New does not serve,
// so adding a route is: register it in New, add its path and method to openapi.json.
//
//go:embed openapi.json
var openAPI []byte

// OpenAPI returns the OpenAPI 3.1 document the server serves (a copy).
func OpenAPI() []byte { return slices.Clone(openAPI) }

func (s *Server) openAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(openAPI)
}

// register serves h at pattern ("METHOD /path") and records the route (Routes).
func (s *Server) register(pattern string, h http.Handler) {
	s.routes = append(s.routes, pattern)
	s.mux.Handle(pattern, h)
}

// Routes lists the routes the server serves, "METHOD /path/{param}", in registration order
// (the 405 and 404 fallbacks left out).
func (s *Server) Routes() []string { return slices.Clone(s.routes) }
