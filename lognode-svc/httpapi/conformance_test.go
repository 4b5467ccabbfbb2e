package httpapi_test

import (
	"testing"

	"github.com/loamhq/loam/lognode-svc/httpapi"
	"github.com/loamhq/loam/shared/streamapi/streamapitest"
)

// The real server passes the API conformance suite that the streamapitest fake passes.
func TestConformance(t *testing.T) {
	n := startNode(t, httpapi.Limits{})
	streamapitest.Conformance(t, n.srv.URL)
}
