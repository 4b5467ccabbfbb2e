package e2e

import "testing"

// TestProduceFetchKillExpress is TestProduceFetchKill on a stream of class express: its WAL
// objects go to loam dev's three zonal directories every 5 ms (the standard flush interval
// is raised to a minute, so nothing of it rides on a standard flush), a SIGKILL in the
// middle, a restart, then a clean restart.
func TestProduceFetchKillExpress(t *testing.T) {
	runE2E(t, e2eOpts{total: 60_000, clients: 8, perReq: 250, killAt: 25_000, class: "express",
		extra: []string{"--flush-interval", "1m"}})
}
