package metatest_test

import (
	"testing"

	"github.com/loamhq/loam/sequencer-svc/server"
	"github.com/loamhq/loam/sequencer-svc/server/servertest"
	"github.com/loamhq/loam/shared/meta/metafake"
	"github.com/loamhq/loam/shared/meta/metatest"
)

// TestSequencer runs the suite over the real sequencer: the in-process client of a
// single-voter Raft group.
func TestSequencer(t *testing.T) {
	n := servertest.Start(t, func(c *server.Config) { c.DisableRPC = true })
	metatest.Run(t, server.NewLocalClient(n))
}

// TestMetafake runs the suite over the in-memory double.
func TestMetafake(t *testing.T) {
	metatest.Run(t, metafake.New())
}
