package node_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/loamhq/loam/lognode-svc/node"
	"github.com/loamhq/loam/shared/objstore"
)

// TestCloseExpiredContextOTLP: a node serving one OTLP transport, or both, or none, closes
// on an expired context without a panic (the gRPC server that is cut may be absent).
func TestCloseExpiredContextOTLP(t *testing.T) {
	mc := startSequencer(t)
	done, cancel := context.WithCancel(context.Background())
	cancel()
	// Close picks between a stopped server and the expired context at random: 16 rounds.
	cases := []struct{ http, grpc string }{{"127.0.0.1:0", ""}, {"", "127.0.0.1:0"}, {"127.0.0.1:0", "127.0.0.1:0"}, {"", ""}}
	for i := range 16 * len(cases) {
		c := cases[i%len(cases)]
		n, err := node.Start(context.Background(), node.Config{NodeID: fmt.Sprintf("o-%d", i), HTTPAddr: "127.0.0.1:0", Bucket: objstore.NewMem(), Meta: mc,
			Logger: quiet(), OTLPHTTPAddr: c.http, OTLPGRPCAddr: c.grpc})
		if err != nil {
			t.Fatal(err)
		}
		if (n.OTLPHTTPAddr() != "") != (c.http != "") || (n.OTLPGRPCAddr() != "") != (c.grpc != "") {
			t.Errorf("case %d: OTLP addresses %q %q", i, n.OTLPHTTPAddr(), n.OTLPGRPCAddr())
		}
		_ = n.Close(done)
	}
}
