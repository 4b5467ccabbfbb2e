package otlp_test

import (
	"bytes"
	"net/http"
	"strings"
	"testing"

	"github.com/loamhq/loam/lognode-svc/otlp"
	"github.com/loamhq/loam/shared/meta"
)

// TestStreamKeyAttribute: a stream whose key_attribute setting is service.name gets records
// keyed by the resource's service.name, a stream without it keyless records, a stream
// without it but named by the node's default keyed by the default, and a setting changed
// through the native API applies to the next export.
func TestStreamKeyAttribute(t *testing.T) {
	e := start(t, withOTLP(otlp.Settings{KeyAttributes: map[string]string{"by-default": "service.name"}}))
	ctx := ctxT(t)
	for _, c := range []meta.StreamConfig{
		{Name: "keyed", KeyAttribute: "service.name"},
		{Name: "plain"},
		{Name: "by-default"},
		{Name: "later"},
	} {
		c.Namespace, c.Partitions = meta.DefaultNS, 4
		if _, err := e.meta.CreateStream(ctx, c); err != nil {
			t.Fatalf("create %s: %v", c.Name, err)
		}
	}
	send := func(stream string) {
		t.Helper()
		for _, transport := range []string{"http", "grpc"} {
			ex := newExporter(t, e, transport, false, map[string]string{"loam-stream": stream}, false)
			for _, svc := range []string{"checkout", "billing"} {
				if err := ex.Export(ctx, makeRecords(t, svc, svc+"-"+transport, 10)); err != nil {
					t.Fatalf("%s to %s: Export: %v", transport, stream, err)
				}
			}
		}
	}
	// checkKeys checks every record of stream is keyed by its service (want true) or keyless.
	checkKeys := func(stream string, keyed bool) {
		t.Helper()
		recs := e.readAll(t, meta.DefaultNS, stream)
		if len(recs) != 40 {
			t.Fatalf("%s holds %d records, want 40", stream, len(recs))
		}
		parts := map[string]int32{}
		for _, r := range recs {
			svc, _, _ := strings.Cut(bodyOf(t, r), "-")
			switch {
			case !keyed && r.Key != nil:
				t.Fatalf("%s: record %q has key %q, want keyless", stream, bodyOf(t, r), *r.Key)
			case keyed && (r.Key == nil || *r.Key != svc):
				t.Fatalf("%s: record %q has key %v, want %q", stream, bodyOf(t, r), r.Key, svc)
			}
			if p, ok := parts[svc]; keyed && ok && p != r.Partition {
				t.Fatalf("%s: service %s in partitions %d and %d", stream, svc, p, r.Partition)
			}
			parts[svc] = r.Partition
		}
	}
	for _, s := range []string{"keyed", "plain", "by-default"} {
		send(s)
	}
	checkKeys("keyed", true)
	checkKeys("plain", false)
	checkKeys("by-default", true)

	// The setting changed through the native API applies to the next export.
	req, _ := http.NewRequest("PATCH", e.http+"/v1/namespaces/default/streams/later", bytes.NewBufferString(`{"key_attribute":"service.name"}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("PATCH key_attribute: %s", resp.Status)
	}
	send("later")
	checkKeys("later", true)
}

// bodyOf is a fetched record's body string.
func bodyOf(t testing.TB, r fetched) string {
	t.Helper()
	for b := range bodies(t, []fetched{r}) {
		return b
	}
	return ""
}
