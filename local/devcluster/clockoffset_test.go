package devcluster

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/loamhq/loam/shared/streamapi"
)

// TestClockOffset: Config.ClockOffset (loam dev --clock-offset) shifts the log node's
// clock where it stamps: 2 minutes fast, its commits are refused as stamped ahead of the
// sequencer, whose clock it does not shift.
func TestClockOffset(t *testing.T) {
	ctx := context.Background()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c, err := Start(ctx, Config{DataDir: t.TempDir(), HTTPListener: ln, FlushInterval: 5 * time.Millisecond,
		SequencerRPC: freeAddr(t), SequencerRaft: freeAddr(t), ClockOffset: 2 * time.Minute,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	cl, _ := streamapi.NewClient("http://" + c.HTTPAddr())
	if _, err := cl.CreateStream(ctx, "default", streamapi.CreateStreamRequest{Name: "clk"}); err != nil {
		t.Fatal(err)
	}
	_, err = cl.Produce(ctx, "default", "clk", []streamapi.Record{{Value: json.RawMessage(`"x"`)}})
	var ae *streamapi.APIError
	if !errors.As(err, &ae) || ae.Detail.Code != streamapi.CodeCommitFailed || !strings.Contains(ae.Detail.Message, "ahead") {
		t.Fatalf("produce through a node 2 minutes fast: %v, want commit_failed naming the clock", err)
	}
}
