package kafka

import "testing"

func TestZoneOf(t *testing.T) {
	for id, want := range map[string]string{
		"":                           "",
		"app":                        "",
		"loam_az=us-east-1a":         "us-east-1a",
		"billing,loam_az=eu-west-1b": "eu-west-1b",
		"a loam_az=z1 b":             "z1",
		"loam_az=z2;x":               "z2",
		"loam_az=":                   "",
	} {
		if got := zoneOf(id); got != want {
			t.Errorf("zoneOf(%q) = %q, want %q", id, got, want)
		}
	}
}

func TestBrokerIDAndLeaders(t *testing.T) {
	if brokerID("node-1") != brokerID("node-1") || brokerID("node-1") == brokerID("node-2") {
		t.Fatal("broker ids are not a stable function of the node id")
	}
	for _, n := range []string{"", "a", "node-1", "dev-1"} {
		if id := brokerID(n); id <= 0 {
			t.Fatalf("brokerID(%q) = %d, want > 0", n, id)
		}
	}
	bs := []broker{{id: 1}, {id: 2}, {id: 3}}
	count := map[int32]int{}
	for p := range int32(30) {
		count[leaderOf(bs, "orders", p).id]++
	}
	for _, b := range bs {
		if count[b.id] != 10 {
			t.Fatalf("leaders spread %v over 30 partitions, want 10 each", count)
		}
	}
}

func TestValidTopic(t *testing.T) {
	for name, want := range map[string]bool{"orders": true, "a.b_c-D9": true, "": false, ".": false, "..": false, "a/b": false, "a b": false} {
		if validTopic(name) != want {
			t.Errorf("validTopic(%q) = %v", name, !want)
		}
	}
}
