// Package arrowtest builds arrow-stream test data: a schema of ten columns of most types
// of the schema model, records for it, and arrow frames of them as a log node's JSON
// produce writes them into WAL chunks.
package arrowtest

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/loamhq/loam/shared/arrowenc"
)

// Schema10 has ten columns; "id" is its key, "ts" its timestamp.
const Schema10 = `{"fields":[
 {"name":"id","type":"int64","nullable":false},
 {"name":"name","type":"utf8","nullable":true},
 {"name":"ts","type":"timestamp","unit":"ms","nullable":false},
 {"name":"day","type":"date32","nullable":true},
 {"name":"price","type":"decimal128","precision":10,"scale":2,"nullable":true},
 {"name":"ok","type":"bool","nullable":true},
 {"name":"raw","type":"binary","nullable":true},
 {"name":"score","type":"float64","nullable":true},
 {"name":"tags","type":"list","nullable":true,"item":{"name":"item","type":"utf8","nullable":true}},
 {"name":"addr","type":"struct","nullable":true,"fields":[{"name":"city","type":"utf8","nullable":true},{"name":"zip","type":"uint32","nullable":true}]}
],"key":"id","timestamp":"ts"}`

// Schema10v2 is Schema10 with a nullable column appended (an allowed evolution).
const Schema10v2 = `{"fields":[
 {"name":"id","type":"int64","nullable":false},
 {"name":"name","type":"utf8","nullable":true},
 {"name":"ts","type":"timestamp","unit":"ms","nullable":false},
 {"name":"day","type":"date32","nullable":true},
 {"name":"price","type":"decimal128","precision":10,"scale":2,"nullable":true},
 {"name":"ok","type":"bool","nullable":true},
 {"name":"raw","type":"binary","nullable":true},
 {"name":"score","type":"float64","nullable":true},
 {"name":"tags","type":"list","nullable":true,"item":{"name":"item","type":"utf8","nullable":true}},
 {"name":"addr","type":"struct","nullable":true,"fields":[{"name":"city","type":"utf8","nullable":true},{"name":"zip","type":"uint32","nullable":true}]},
 {"name":"note","type":"utf8","nullable":true}
],"key":"id","timestamp":"ts"}`

// MustSchema parses a schema or fails t.
func MustSchema(t testing.TB, js string) *arrowenc.Schema {
	t.Helper()
	s, err := arrowenc.ParseSchema([]byte(js))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Record returns record i of a stream of Schema10 (with note set when note is true), as
// produce takes it and, every column rendered, as fetch answers it. Every column's
// values are about equally large (about 10 bytes a value), so one column is about a tenth
// of a record.
func Record(i int64, note bool) (in, out string) {
	ok := "true"
	if i%3 == 0 {
		ok = "null"
	}
	ts := 1764600000000 + i
	day := fmt.Sprintf("2025-%02d-%02d", 1+i%12, 1+i%28)
	base := fmt.Sprintf(`"id":%d,"name":"name-%06d","ts":%d,"day":"%s","price":"%d.%02d","ok":%s,"raw":"cmF3LWJ5dGVz","score":%d.5,"tags":["t%d","u"],"addr":{"city":"city%03d","zip":%d}`,
		i, i%1000000, ts, day, i%100000, i%100, ok, i%1000, i%100, i%1000, i%100000)
	if note {
		return "{" + base + fmt.Sprintf(`,"note":"n%d"`, i) + "}", "{" + base + fmt.Sprintf(`,"note":"n%d"`, i) + "}"
	}
	return "{" + base + "}", "{" + base + "}"
}

// Frame builds one arrow frame of records [from, from+n) of s (schema version id), as a
// JSON produce does, and returns it with the records' largest timestamp.
func Frame(t testing.TB, s *arrowenc.Schema, id uint32, from int64, n int, note bool) ([]byte, int64) {
	t.Helper()
	b := arrowenc.NewBuilder(s, nil)
	defer b.Release()
	var maxTS int64
	for i := range n {
		in, _ := Record(from+int64(i), note)
		row, err := b.Append(i, json.RawMessage(in), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		maxTS = max(maxTS, row.TimestampMs)
	}
	batch := b.NewBatch()
	defer batch.Release()
	p, err := arrowenc.EncodePayload(id, batch)
	if err != nil {
		t.Fatal(err)
	}
	return p, maxTS
}
