package servertest

import (
	"testing"

	"github.com/loamhq/loam/shared/meta"
)

func TestClientCommits(t *testing.T) {
	mc := Client(t)
	ctx := t.Context()
	st, err := mc.CreateStream(ctx, meta.StreamConfig{Namespace: meta.DefaultNS, Name: "s", Partitions: 1, Class: meta.ClassStandard,
		Encoding: meta.EncodingKafka, RetentionMs: -1, RetentionBytes: -1, CleanupPolicy: meta.CleanupDelete})
	if err != nil {
		t.Fatal(err)
	}
	_, ps, err := mc.Lookup(ctx, st.ID, 0, 0, 0)
	if err != nil || ps.HighWatermark != 0 {
		t.Fatalf("lookup of a new partition: %+v %v", ps, err)
	}
}
