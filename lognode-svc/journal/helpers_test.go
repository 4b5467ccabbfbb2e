package journal

import (
	"fmt"
	"testing"

	"github.com/loamhq/loam/shared/recordbatch"
)

// batch builds one uncompressed batch of n records with values prefix-0 .. prefix-(n-1).
func batch(t testing.TB, prefix string, n int) []byte {
	t.Helper()
	recs := make([]recordbatch.Record, n)
	for i := range recs {
		recs[i] = recordbatch.Record{Timestamp: 1700000000000 + int64(i), Value: fmt.Appendf(nil, "%s-%d", prefix, i)}
	}
	b, err := recordbatch.Append(nil, recs, recordbatch.DefaultBuildOptions())
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// values decodes the records of concatenated batches as (offset, value) pairs.
func values(t testing.TB, b []byte) []string {
	t.Helper()
	var out []string
	for len(b) > 0 {
		bt, rest, err := recordbatch.Parse(b)
		if err != nil {
			t.Fatal(err)
		}
		recs, err := bt.Records()
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			out = append(out, fmt.Sprintf("%d:%s", bt.BaseOffset+int64(r.OffsetDelta), r.Value))
		}
		b = rest
	}
	return out
}
