package arrowenc

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
)

var fullRecords = []string{
	`{"id":1,"name":"ada","ts":1700000000123,"day":"2024-02-29","price":"12.34","ok":true,"raw":"AAEC","score":1.5,"tags":["a",null,"b"],"addr":{"city":"Oslo","zip":150}}`,
	`{"id":-9223372036854775808,"name":null,"ts":"2023-11-14T22:13:20.5Z","day":null,"price":null,"ok":false,"raw":null,"score":null,"tags":[],"addr":null}`,
	`{"id":3,"ts":0}`,
}

// wantJSON is fullRecords as fetch renders them: every column, in schema order.
var wantJSON = []string{
	`{"id":1,"name":"ada","ts":1700000000123,"day":"2024-02-29","price":"12.34","ok":true,"raw":"AAEC","score":1.5,"tags":["a",null,"b"],"addr":{"city":"Oslo","zip":150}}`,
	`{"id":-9223372036854775808,"name":null,"ts":1700000000500,"day":null,"price":null,"ok":false,"raw":null,"score":null,"tags":[],"addr":null}`,
	`{"id":3,"name":null,"ts":0,"day":null,"price":null,"ok":null,"raw":null,"score":null,"tags":null,"addr":null}`,
}

func buildPayload(t testing.TB, s *Schema, recs []string, hdrs [][]Header) ([]byte, []Row) {
	t.Helper()
	b := NewBuilder(s, nil)
	defer b.Release()
	var rows []Row
	for i, r := range recs {
		var h []Header
		if hdrs != nil {
			h = hdrs[i]
		}
		row, err := b.Append(i, json.RawMessage(r), h, 42)
		if err != nil {
			t.Fatalf("Append %d: %v", i, err)
		}
		rows = append(rows, row)
	}
	batch := b.NewBatch()
	defer batch.Release()
	p, err := EncodePayload(7, batch)
	if err != nil {
		t.Fatal(err)
	}
	return p, rows
}

func TestPayloadRoundTrip(t *testing.T) {
	s := mustParse(t, fullSchema)
	p, rows := buildPayload(t, s, fullRecords, nil)
	if string(rows[0].Key) != "1" || rows[0].TimestampMs != 1700000000123 || rows[1].TimestampMs != 1700000000500 {
		t.Errorf("rows = %+v", rows)
	}
	dp := decodeOne(t, p)
	defer dp.Release()
	if dp.SchemaID != 7 || dp.Rows != 3 || len(dp.Batches) != 1 {
		t.Fatalf("header %+v, %d batches", dp.FrameHeader, len(dp.Batches))
	}
	all, _ := Project(dp.Schema, nil)
	for i, want := range wantJSON {
		got := string(AppendRowJSON(nil, dp.Batches[0], i, all))
		if got != want {
			t.Errorf("row %d:\n got %s\nwant %s", i, got, want)
		}
		// The rendered form is accepted back and renders the same.
		p2, _ := buildPayload(t, s, []string{got}, nil)
		dp2 := decodeOne(t, p2)
		if again := string(AppendRowJSON(nil, dp2.Batches[0], 0, all)); again != want {
			t.Errorf("row %d re-produced: %s", i, again)
		}
		dp2.Release()
	}
	proj, err := Project(dp.Schema, []string{"name", "id"})
	if err != nil {
		t.Fatal(err)
	}
	if got := string(AppendRowJSON(nil, dp.Batches[0], 0, proj)); got != `{"name":"ada","id":1}` {
		t.Errorf("projected: %s", got)
	}
	pb := ProjectBatch(dp.Batches[0], proj)
	defer pb.Release()
	if pb.NumCols() != 2 || pb.Schema().Field(0).Name != "name" {
		t.Errorf("ProjectBatch schema %s", pb.Schema())
	}
	if _, err := Project(dp.Schema, []string{"nope"}); err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("unknown column: %v", err)
	}
}

func TestHeadersColumn(t *testing.T) {
	s := mustParse(t, `{"fields":[{"name":"v","type":"int32","nullable":true}]}`)
	b := NewBuilder(s, nil)
	_, err := b.Append(4, json.RawMessage(`{"v":1}`), []Header{{Key: "k", Value: []byte("x")}}, 0)
	if err == nil || err.Error() != "record 4: the stream's schema refuses headers" {
		t.Errorf("refused headers: %v", err)
	}
	b.Release()
	s.AddHeadersColumn()
	hs := [][]Header{{{Key: "k", Value: []byte("x")}, {Key: "n"}}, nil}
	p, _ := buildPayload(t, s, []string{`{"v":1}`, `{"v":2}`}, hs)
	dp := decodeOne(t, p)
	defer dp.Release()
	got := RowHeaders(dp.Batches[0], 0)
	if len(got) != 2 || got[0].Key != "k" || string(got[0].Value) != "x" || got[1].Value != nil {
		t.Errorf("headers = %+v", got)
	}
	if RowHeaders(dp.Batches[0], 1) != nil {
		t.Errorf("row 1 has headers")
	}
	all, _ := Project(dp.Schema, nil)
	if j := string(AppendRowJSON(nil, dp.Batches[0], 0, all)); j != `{"v":1}` {
		t.Errorf("json = %s", j)
	}
}

func TestAppendErrors(t *testing.T) {
	s := mustParse(t, fullSchema)
	cases := []struct{ rec, want string }{
		{`[1]`, "record 5: the value is not a JSON object"},
		{`{"ts":1}`, "record 5: field id: null or missing, but the column is not nullable"},
		{`{"id":"1","ts":1}`, "record 5: field id: want an integer (int64), got a string"},
		{`{"id":1.5,"ts":1}`, "record 5: field id: 1.5 is not an int64"},
		{`{"id":1,"ts":1,"extra":2}`, "record 5: field extra: not a column of the schema"},
		{`{"id":1,"ts":"yesterday"}`, `record 5: field ts: "yesterday" is not an RFC 3339 time`},
		{`{"id":1,"ts":1,"day":"2024-13-01"}`, `record 5: field day: "2024-13-01" is not a date`},
		{`{"id":1,"ts":1,"price":"123456789.1"}`, "record 5: field price: 123456789.1 does not fit decimal128(10, 2)"},
		{`{"id":1,"ts":1,"price":"1.234"}`, "record 5: field price: 1.234 has more than 2 digits"},
		{`{"id":1,"ts":1,"ok":1}`, "record 5: field ok: want true or false, got a number"},
		{`{"id":1,"ts":1,"raw":"!!"}`, "record 5: field raw: not base64"},
		{`{"id":1,"ts":1,"tags":"a"}`, "record 5: field tags: want an array, got a string"},
		{`{"id":1,"ts":1,"tags":["a",3]}`, "record 5: field tags[1]: want a string, got a number"},
		{`{"id":1,"ts":1,"addr":{"zip":-1}}`, "record 5: field addr.zip: -1 is not a uint32"},
		{`{"id":1,"ts":1,"addr":{"street":"x"}}`, "record 5: field addr.street: not a member of the struct"},
	}
	b := NewBuilder(s, nil)
	defer b.Release()
	for _, c := range cases {
		_, err := b.Append(5, json.RawMessage(c.rec), nil, 0)
		var re *RecordError
		if err == nil || !errors.As(err, &re) || !errors.Is(err, ErrInvalidRecord) || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.rec, err, c.want)
		}
	}
	if b.Rows() != 0 {
		t.Errorf("refused records were appended: %d rows", b.Rows())
	}
}

func decodeOne(t testing.TB, p []byte) *Frame {
	t.Helper()
	fs, err := DecodePayload(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(fs) != 1 {
		t.Fatalf("%d frames", len(fs))
	}
	return fs[0]
}

// Frames concatenated (as the writer does with the requests of a partition) decode in
// order, each with its own schema id.
func TestPayloadFrames(t *testing.T) {
	s1 := mustParse(t, `{"fields":[{"name":"a","type":"int64","nullable":false}]}`)
	s2 := mustParse(t, `{"fields":[{"name":"a","type":"int64","nullable":false},{"name":"b","type":"utf8","nullable":true}]}`)
	p1, _ := buildPayload(t, s1, []string{`{"a":1}`, `{"a":2}`}, nil)
	p2, _ := buildPayload(t, s2, []string{`{"a":3,"b":"x"}`}, nil)
	both := append(append([]byte{}, p1...), p2...)
	fs, err := DecodePayload(both)
	if err != nil {
		t.Fatal(err)
	}
	defer ReleaseFrames(fs)
	if len(fs) != 2 || Rows(fs) != 3 || fs[1].Schema.NumFields() != 2 {
		t.Fatalf("%d frames, %d rows", len(fs), Rows(fs))
	}
	all, _ := Project(fs[1].Schema, nil)
	if got := string(AppendRowJSON(nil, fs[1].Batches[0], 0, all)); got != `{"a":3,"b":"x"}` {
		t.Fatalf("frame 2: %s", got)
	}
}

func TestPayloadGolden(t *testing.T) {
	s := mustParse(t, fullSchema)
	got, _ := buildPayload(t, s, fullRecords, nil)
	const path = "testdata/v1/payload.bin"
	if os.Getenv("ARROWENC_WRITE_GOLDEN") != "" {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("payload bytes differ from %s", path)
	}
	dp := decodeOne(t, want)
	defer dp.Release()
	all, _ := Project(dp.Schema, nil)
	if got := string(AppendRowJSON(nil, dp.Batches[0], 0, all)); got != wantJSON[0] {
		t.Errorf("golden row 0: %s", got)
	}
}

func TestDecodePayloadErrors(t *testing.T) {
	s := mustParse(t, fullSchema)
	p, _ := buildPayload(t, s, fullRecords, nil)
	mut := func(f func(b []byte) []byte) []byte { return f(append([]byte{}, p...)) }
	cases := []struct {
		b    []byte
		want error
		msg  string
	}{
		{p[:10], ErrCorrupt, "shorter than the 20-byte frame header"},
		{p[:40], ErrCorrupt, "IPC length"},
		{mut(func(b []byte) []byte { b[19]--; return append(b[:len(b)-1], []byte("LARW")...) }), ErrCorrupt, "frame at byte"},
		{mut(func(b []byte) []byte { b[0] = 'X'; return b }), ErrCorrupt, "bad magic"},
		{mut(func(b []byte) []byte { b[4] = 2; return b }), ErrUnsupportedVersion, "version 2"},
		{mut(func(b []byte) []byte { b[15] = 4; return b }), ErrCorrupt, "batches hold 3 rows, header says 4"},
		{mut(func(b []byte) []byte { b[11] = 0; return b }), ErrCorrupt, "schema id 0"},
		{mut(func(b []byte) []byte { b[30] ^= 0xff; return b }), ErrCorrupt, "arrow ipc"},
	}
	for _, c := range cases {
		_, err := DecodePayload(c.b)
		if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%q: %v, want %v with %q", c.msg, err, c.want, c.msg)
		}
	}
}
