package grpcapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/loamhq/loam/lognode-svc/grpcapi"
	"github.com/loamhq/loam/lognode-svc/httpapi"
	"github.com/loamhq/loam/shared/arrowenc"
	"github.com/loamhq/loam/shared/streamapi/loamv1pb"
)

const flightSchema = `{"fields":[
 {"name":"id","type":"int64","nullable":false},
 {"name":"name","type":"utf8","nullable":true},
 {"name":"ts","type":"timestamp","unit":"ms","nullable":false},
 {"name":"price","type":"decimal128","precision":10,"scale":2,"nullable":true},
 {"name":"tags","type":"list","nullable":true,"item":{"type":"utf8","nullable":true}},
 {"name":"ok","type":"bool","nullable":true}
],"key":"id","timestamp":"ts"}`

func httpDo(t testing.TB, method, url, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func (e *env) createArrow(t testing.TB, name string, partitions int, schema string) {
	t.Helper()
	if code, body := httpDo(t, "POST", e.http+"/v1/namespaces/default/streams", fmt.Sprintf(`{"name":%q,"partitions":%d,"encoding":"arrow","schema":%s}`, name, partitions, schema)); code != 201 {
		t.Fatalf("create %s: %d %s", name, code, body)
	}
}

// httpValues returns the JSON fetch of a partition: each record's value, by offset.
func (e *env) httpValues(t testing.TB, stream string, p int, columns string) []string {
	t.Helper()
	url := fmt.Sprintf("%s/v1/namespaces/default/streams/%s/partitions/%d/records?offset=0", e.http, stream, p)
	if columns != "" {
		url += "&columns=" + columns
	}
	code, body := httpDo(t, "GET", url, "")
	var f struct {
		Records []struct {
			Value json.RawMessage `json:"value"`
		} `json:"records"`
	}
	if code != 200 || json.Unmarshal([]byte(body), &f) != nil {
		t.Fatalf("fetch %s/%d: %d %s", stream, p, code, body)
	}
	out := make([]string, len(f.Records))
	for i, r := range f.Records {
		out[i] = string(r.Value)
	}
	return out
}

// doGet reads a ticket with the arrow-go Flight client: the stream's schema and each row
// rendered as the JSON fetch renders values.
func doGet(t testing.TB, c flight.Client, ctx context.Context, tk []byte) (*arrow.Schema, []string) {
	t.Helper()
	st, err := c.DoGet(ctx, &flight.Ticket{Ticket: tk})
	if err != nil {
		t.Fatal(err)
	}
	r, err := flight.NewRecordReader(st)
	if err != nil {
		t.Fatalf("DoGet %s: %v", tk, err)
	}
	defer r.Release()
	var rows []string
	for r.Next() {
		b := r.RecordBatch()
		all, _ := arrowenc.Project(b.Schema(), nil)
		for i := 0; i < int(b.NumRows()); i++ {
			rows = append(rows, string(arrowenc.AppendRowJSON(nil, b, i, all)))
		}
	}
	if err := r.Err(); err != nil && err != io.EOF {
		t.Fatalf("DoGet %s: %v", tk, err)
	}
	return r.Schema(), rows
}

func flightRecords(n int) string {
	var recs []string
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("%q", fmt.Sprint("n", i))
		if i%3 == 0 {
			name = "null"
		}
		recs = append(recs, fmt.Sprintf(`{"value":{"id":%d,"name":%s,"ts":%d,"price":"%d.%02d","tags":["a%d"],"ok":%v}}`, i, name, 1700000000000+i, i, i%100, i, i%2 == 0))
	}
	return `{"records":[` + strings.Join(recs, ",") + `]}`
}

// TestFlightDoGet: JSON produced rows read back over Flight DoGet (GetFlightInfo's
// tickets, the arrow-go Flight client) are the JSON fetch's values, all columns and
// projected; an offset range; ListFlights lists the arrow streams only.
func TestFlightDoGet(t *testing.T) {
	e := start(t, httpapi.Limits{})
	e.createArrow(t, "fl", 3, flightSchema)
	e.createStream(t, "plain", 1)
	if code, body := httpDo(t, "POST", e.http+"/v1/namespaces/default/streams/fl/records", flightRecords(40)); code != 200 {
		t.Fatalf("produce: %d %s", code, body)
	}
	c := flight.NewClientFromConn(e.conn, nil)
	cx := ctx(t)
	info, err := c.GetFlightInfo(cx, &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"default", "fl"}})
	if err != nil {
		t.Fatal(err)
	}
	as, err := flight.DeserializeSchema(info.GetSchema(), memory.DefaultAllocator)
	if err != nil || as.NumFields() != 6 || as.Field(3).Type.String() != "decimal(10, 2)" {
		t.Fatalf("flight info schema %v: %v", as, err)
	}
	if len(info.GetEndpoint()) != 3 || info.GetTotalRecords() != 40 {
		t.Fatalf("flight info: %d endpoints, %d records", len(info.GetEndpoint()), info.GetTotalRecords())
	}
	total := 0
	for p, ep := range info.GetEndpoint() {
		_, rows := doGet(t, c, cx, ep.GetTicket().GetTicket())
		want := e.httpValues(t, "fl", p, "")
		if strings.Join(rows, "\n") != strings.Join(want, "\n") {
			t.Fatalf("partition %d: DoGet\n%s\nJSON fetch\n%s", p, strings.Join(rows, "\n"), strings.Join(want, "\n"))
		}
		total += len(rows)
	}
	if total != 40 {
		t.Fatalf("DoGet read %d rows", total)
	}

	// Projection, and an offset range.
	tk, _ := json.Marshal(grpcapi.FlightTicket{Namespace: "default", Stream: "fl", Partition: 0, Offset: 1, EndOffset: 3, Columns: []string{"name", "id"}})
	sch, rows := doGet(t, c, cx, tk)
	want := e.httpValues(t, "fl", 0, "name,id")[1:3]
	if sch.NumFields() != 2 || sch.Field(0).Name != "name" || strings.Join(rows, "\n") != strings.Join(want, "\n") {
		t.Fatalf("projected DoGet %v:\n%s\nwant\n%s", sch, strings.Join(rows, "\n"), strings.Join(want, "\n"))
	}

	// ListFlights: the arrow streams of the namespace.
	lf, err := c.ListFlights(cx, &flight.Criteria{Expression: []byte("default")})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for {
		fi, err := lf.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, strings.Join(fi.GetFlightDescriptor().GetPath(), "/"))
	}
	if strings.Join(names, ",") != "default/fl" {
		t.Fatalf("ListFlights: %v", names)
	}

	// Errors name what is wrong.
	for name, c2 := range map[string]struct {
		ticket string
		code   codes.Code
		want   string
	}{
		"not json":       {`nope`, codes.InvalidArgument, "not a JSON FlightTicket"},
		"unknown field":  {`{"namespace":"default","stream":"fl","x":1}`, codes.InvalidArgument, `unknown field "x"`},
		"kafka stream":   {`{"namespace":"default","stream":"plain"}`, codes.InvalidArgument, `stream "plain" has encoding kafka`},
		"no stream":      {`{"namespace":"default","stream":"nope"}`, codes.NotFound, "nope"},
		"partition":      {`{"namespace":"default","stream":"fl","partition":3}`, codes.NotFound, "partition 3 does not exist"},
		"column":         {`{"namespace":"default","stream":"fl","columns":["zz"]}`, codes.InvalidArgument, `column "zz" is not in the schema`},
		"past the end":   {`{"namespace":"default","stream":"fl","offset":1000}`, codes.OutOfRange, "1000"},
		"reversed range": {`{"namespace":"default","stream":"fl","offset":5,"end_offset":2}`, codes.InvalidArgument, "not a range"},
	} {
		st, err := c.DoGet(cx, &flight.Ticket{Ticket: []byte(c2.ticket)})
		if err == nil {
			_, err = st.Recv()
		}
		if status.Code(err) != c2.code || !strings.Contains(err.Error(), c2.want) {
			t.Errorf("%s: %v, want %s %s", name, err, c2.code, c2.want)
		}
	}
	if _, err := c.GetFlightInfo(cx, &flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: []byte("x")}); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "PATH") {
		t.Errorf("CMD descriptor: %v", err)
	}
}

// TestFlightDoGetAcrossVersions: rows of an older schema version come out of DoGet with
// the latest schema, the added column null.
func TestFlightDoGetAcrossVersions(t *testing.T) {
	e := start(t, httpapi.Limits{})
	e.createArrow(t, "ev", 1, `{"fields":[{"name":"id","type":"int64","nullable":false}]}`)
	base := e.http + "/v1/namespaces/default/streams/ev"
	if code, body := httpDo(t, "POST", base+"/records", `{"records":[{"value":{"id":1}}]}`); code != 200 {
		t.Fatalf("produce: %d %s", code, body)
	}
	if code, body := httpDo(t, "PUT", base+"/schema", `{"schema":{"fields":[{"name":"id","type":"int64","nullable":false},{"name":"n","type":"utf8","nullable":true}]},"expect_version":1}`); code != 200 {
		t.Fatalf("evolve: %d %s", code, body)
	}
	if code, body := httpDo(t, "POST", base+"/records", `{"records":[{"value":{"id":2,"n":"two"}}]}`); code != 200 {
		t.Fatalf("produce v2: %d %s", code, body)
	}
	c := flight.NewClientFromConn(e.conn, nil)
	tk, _ := json.Marshal(grpcapi.FlightTicket{Namespace: "default", Stream: "ev"})
	sch, rows := doGet(t, c, ctx(t), tk)
	if sch.NumFields() != 2 || strings.Join(rows, ",") != `{"id":1,"n":null},{"id":2,"n":"two"}` {
		t.Fatalf("DoGet across versions: %v %v", sch, rows)
	}
	tk, _ = json.Marshal(grpcapi.FlightTicket{Namespace: "default", Stream: "ev", Columns: []string{"n"}})
	if _, rows := doGet(t, c, ctx(t), tk); strings.Join(rows, ",") != `{"n":null},{"n":"two"}` {
		t.Fatalf("projected DoGet across versions: %v", rows)
	}
}

// putBatch builds a batch of flightSchema's columns (ids from first).
func putBatch(as *arrow.Schema, first, n int) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, as)
	defer b.Release()
	for i := first; i < first+n; i++ {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		if i%3 == 0 {
			b.Field(1).AppendNull()
		} else {
			b.Field(1).(*array.StringBuilder).Append(fmt.Sprint("n", i))
		}
		b.Field(2).(*array.TimestampBuilder).Append(arrow.Timestamp(1700000000000 + i))
		b.Field(3).(*array.Decimal128Builder).Append(decimal128FromInt(int64(i*100 + i%100)))
		lb := b.Field(4).(*array.ListBuilder)
		lb.Append(true)
		lb.ValueBuilder().(*array.StringBuilder).Append(fmt.Sprint("a", i))
		b.Field(5).(*array.BooleanBuilder).Append(i%2 == 0)
	}
	return b.NewRecordBatch()
}

// TestFlightDoPut: two record batches put with the arrow-go Flight client are acknowledged
// one PutResult each (FlightPutAck) and fetched over HTTP identical to the JSON produce of
// the same rows; a schema of neither version is refused naming the difference.
func TestFlightDoPut(t *testing.T) {
	e := start(t, httpapi.Limits{})
	e.createArrow(t, "put", 3, flightSchema)
	e.createArrow(t, "json", 3, flightSchema)
	if code, body := httpDo(t, "POST", e.http+"/v1/namespaces/default/streams/json/records", flightRecords(40)); code != 200 {
		t.Fatalf("produce: %d %s", code, body)
	}
	sch, _ := arrowenc.ParseSchema([]byte(flightSchema))
	as := sch.Arrow()
	c := flight.NewClientFromConn(e.conn, nil)
	cx := ctx(t)
	put, err := c.DoPut(cx)
	if err != nil {
		t.Fatal(err)
	}
	w := flight.NewRecordWriter(put, ipc.WithSchema(as))
	w.SetFlightDescriptor(&flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"default", "put"}})
	var acks []grpcapi.FlightPutAck
	for _, r := range [][2]int{{0, 25}, {25, 15}} {
		b := putBatch(as, r[0], r[1])
		if err := w.Write(b); err != nil {
			t.Fatal(err)
		}
		b.Release()
		res, err := put.Recv()
		if err != nil {
			t.Fatal(err)
		}
		var a grpcapi.FlightPutAck
		if err := json.Unmarshal(res.GetAppMetadata(), &a); err != nil {
			t.Fatalf("ack %s: %v", res.GetAppMetadata(), err)
		}
		acks = append(acks, a)
	}
	w.Close()
	if err := put.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := put.Recv(); err != io.EOF {
		t.Fatalf("after the last ack: %v", err)
	}
	var acked int64
	for i, a := range acks {
		if a.Batch != int64(i) || !strings.HasPrefix(a.Token, "v1.") {
			t.Fatalf("ack %d: %+v", i, a)
		}
		for _, p := range a.Partitions {
			acked += p.Records
		}
	}
	if acked != 40 {
		t.Fatalf("acks %+v hold %d records", acks, acked)
	}
	for p := 0; p < 3; p++ {
		got, want := e.httpValues(t, "put", p, ""), e.httpValues(t, "json", p, "")
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("partition %d: DoPut\n%s\nJSON produce\n%s", p, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}

	// A schema of neither version; a partition put; a kafka stream.
	bad := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "nom", Type: arrow.BinaryTypes.String, Nullable: true}}, nil)
	if err := putOne(t, c, []string{"default", "put"}, bad, nil); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), `column 1 is "nom", the stream's schema has "name"`) {
		t.Fatalf("bad schema: %v", err)
	}
	if err := putOne(t, c, []string{"default", "put", "7"}, as, nil); status.Code(err) != codes.NotFound || !strings.Contains(err.Error(), "partition 7 does not exist") {
		t.Fatalf("bad partition: %v", err)
	}
	e.createStream(t, "plain", 1)
	if err := putOne(t, c, []string{"default", "plain"}, as, nil); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "encoding kafka") {
		t.Fatalf("kafka stream: %v", err)
	}
	var ack grpcapi.FlightPutAck
	if err := putOne(t, c, []string{"default", "put", "2"}, as, &ack); err != nil || len(ack.Partitions) != 1 || ack.Partitions[0].Partition != 2 || ack.Partitions[0].Records != 3 {
		t.Fatalf("partition put: %+v %v", ack, err)
	}
}

// putOne puts one batch of 3 rows of as to path and returns the call's error (its ack in
// ack when given).
func putOne(t *testing.T, c flight.Client, path []string, as *arrow.Schema, ack *grpcapi.FlightPutAck) error {
	t.Helper()
	put, err := c.DoPut(ctx(t))
	if err != nil {
		return err
	}
	w := flight.NewRecordWriter(put, ipc.WithSchema(as))
	w.SetFlightDescriptor(&flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: path})
	var b arrow.RecordBatch
	if as.NumFields() == 6 {
		b = putBatch(as, 100, 3)
	} else {
		rb := array.NewRecordBuilder(memory.DefaultAllocator, as)
		rb.Field(0).(*array.Int64Builder).AppendValues([]int64{1, 2, 3}, nil)
		rb.Field(1).(*array.StringBuilder).AppendValues([]string{"a", "b", "c"}, nil)
		b = rb.NewRecordBatch()
		rb.Release()
	}
	defer b.Release()
	_ = w.Write(b) // a refusal may end the call before the batch is sent
	_ = put.CloseSend()
	res, err := put.Recv()
	if err != nil {
		return err
	}
	if ack != nil {
		if err := json.Unmarshal(res.GetAppMetadata(), ack); err != nil {
			t.Fatal(err)
		}
	}
	_, err = put.Recv()
	if err == io.EOF {
		return nil
	}
	return err
}

// TestFlightAuth: with API keys enforced, every Flight call needs a key of the namespace
// it names (or an admin key), as loam.v1 calls do.
func TestFlightAuth(t *testing.T) {
	conn, admin := startAuthNode(t)
	ac := withKey(t, admin)
	if _, err := loamv1pb.NewNamespaceServiceClient(conn).CreateNamespace(ac, &loamv1pb.CreateNamespaceRequest{Name: "team-b"}); err != nil {
		t.Fatal(err)
	}
	other, err := loamv1pb.NewKeyServiceClient(conn).CreateKey(ac, &loamv1pb.CreateKeyRequest{Namespace: "team-b"})
	if err != nil {
		t.Fatal(err)
	}
	c := flight.NewClientFromConn(conn, nil)
	calls := map[string]func(context.Context) error{
		"GetFlightInfo": func(cx context.Context) error {
			_, err := c.GetFlightInfo(cx, &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"default", "s"}})
			return err
		},
		"DoGet": func(cx context.Context) error {
			st, err := c.DoGet(cx, &flight.Ticket{Ticket: []byte(`{"namespace":"default","stream":"s"}`)})
			if err == nil {
				_, err = st.Recv()
			}
			return err
		},
		"ListFlights": func(cx context.Context) error {
			st, err := c.ListFlights(cx, &flight.Criteria{})
			if err == nil {
				_, err = st.Recv()
			}
			return err
		},
		"DoPut": func(cx context.Context) error {
			put, err := c.DoPut(cx)
			if err != nil {
				return err
			}
			as := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil)
			w := flight.NewRecordWriter(put, ipc.WithSchema(as))
			w.SetFlightDescriptor(&flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"default", "s"}})
			rb := array.NewRecordBuilder(memory.DefaultAllocator, as)
			rb.Field(0).(*array.Int64Builder).Append(1)
			b := rb.NewRecordBatch()
			_ = w.Write(b)
			b.Release()
			rb.Release()
			_ = put.CloseSend()
			_, err = put.Recv()
			return err
		},
	}
	for name, call := range calls {
		wantCode(t, name+" without a key", call(ctx(t)), codes.Unauthenticated, "UNAUTHORIZED")
		wantCode(t, name+" with a bad key", call(withKey(t, "loam_nope")), codes.Unauthenticated, "UNAUTHORIZED")
		wantCode(t, name+" with another namespace's key", call(withKey(t, other.GetKey())), codes.PermissionDenied, "PERMISSION_DENIED")
		// The admin key passes: the call then fails on the missing stream (ListFlights
		// of default lists nothing).
		if err := call(ac); name == "ListFlights" && err != io.EOF || name != "ListFlights" && status.Code(err) != codes.NotFound {
			t.Errorf("%s with the admin key: %v", name, err)
		}
	}
}

// flightIPC is an Arrow IPC stream of rows for the gRPC produce of IPC bytes.
func flightIPC(t testing.TB, as *arrow.Schema, first, n int) []byte {
	t.Helper()
	b := putBatch(as, first, n)
	defer b.Release()
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(as))
	if err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	_ = w.Close()
	return buf.Bytes()
}

func decimal128FromInt(v int64) decimal128.Num { return decimal128.FromI64(v) }

// TestFlightDoPutStreaming: a client that sends its batches without waiting for their
// acks (the writer then commits the batches queued behind one together) gets one ack per
// batch, in order, whose offsets hold exactly its rows; a bad batch in the middle ends the
// call after the batches before it are acknowledged and stored, and nothing after it is.
func TestFlightDoPutStreaming(t *testing.T) {
	e := start(t, httpapi.Limits{})
	e.createArrow(t, "s", 2, flightSchema)
	sch, _ := arrowenc.ParseSchema([]byte(flightSchema))
	as := sch.Arrow()
	c := flight.NewClientFromConn(e.conn, nil)
	put, err := c.DoPut(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	w := flight.NewRecordWriter(put, ipc.WithSchema(as))
	w.SetFlightDescriptor(&flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"default", "s"}})
	const batches, per = 30, 7
	go func() {
		for i := 0; i < batches; i++ {
			b := putBatch(as, i*per, per)
			_ = w.Write(b)
			b.Release()
		}
		_ = w.Close()
		_ = put.CloseSend()
	}()
	owner := map[string]int{} // partition/offset → id
	for i := 0; i < batches; i++ {
		res, err := put.Recv()
		if err != nil {
			t.Fatalf("ack %d: %v", i, err)
		}
		var a grpcapi.FlightPutAck
		if err := json.Unmarshal(res.GetAppMetadata(), &a); err != nil || a.Batch != int64(i) {
			t.Fatalf("ack %d: %s %v", i, res.GetAppMetadata(), err)
		}
		var n int64
		for _, p := range a.Partitions {
			for j := int64(0); j < p.Records; j++ {
				k := fmt.Sprintf("%d/%d", p.Partition, p.BaseOffset+j)
				if _, dup := owner[k]; dup {
					t.Fatalf("offset %s acknowledged twice", k)
				}
				owner[k] = i
			}
			n += p.Records
		}
		if n != per {
			t.Fatalf("ack %d holds %d rows, want %d", i, n, per)
		}
	}
	if _, err := put.Recv(); err != io.EOF {
		t.Fatalf("after the last ack: %v", err)
	}
	total := 0
	for p := 0; p < 2; p++ {
		for off, v := range e.httpValues(t, "s", p, "id") {
			var row struct{ ID int }
			_ = json.Unmarshal([]byte(v), &row)
			if owner[fmt.Sprintf("%d/%d", p, off)] != row.ID/per {
				t.Fatalf("partition %d offset %d holds id %d, acknowledged for batch %d", p, off, row.ID, owner[fmt.Sprintf("%d/%d", p, off)])
			}
			total++
		}
	}
	if total != batches*per {
		t.Fatalf("%d rows stored, want %d", total, batches*per)
	}

	// Batch 5 holds a null id.
	e.createArrow(t, "bad", 1, flightSchema)
	nullable := arrow.NewSchema(append([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true}}, as.Fields()[1:]...), nil)
	put, err = c.DoPut(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	w = flight.NewRecordWriter(put, ipc.WithSchema(nullable))
	w.SetFlightDescriptor(&flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"default", "bad"}})
	go func() {
		for i := 0; i < 8; i++ {
			b := putBatch(nullable, i*per, per)
			if i == 5 {
				rb := array.NewRecordBuilder(memory.DefaultAllocator, nullable)
				rb.Field(0).AppendNull()
				rb.Field(1).AppendNull()
				rb.Field(2).(*array.TimestampBuilder).Append(1)
				rb.Field(3).AppendNull()
				rb.Field(4).AppendNull()
				rb.Field(5).AppendNull()
				b.Release()
				b = rb.NewRecordBatch()
				rb.Release()
			}
			_ = w.Write(b)
			b.Release()
		}
		_ = put.CloseSend()
	}()
	acks := 0
	for {
		_, err := put.Recv()
		if err != nil {
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), `record batch 5: arrowenc: invalid arrow ipc stream: row 35: column "id" is null`) {
				t.Fatalf("after %d acks: %v", acks, err)
			}
			break
		}
		acks++
	}
	if acks != 5 {
		t.Fatalf("%d acks before the refusal, want 5", acks)
	}
	if got := len(e.httpValues(t, "bad", 0, "")); got != 5*per {
		t.Fatalf("%d rows stored, want %d", got, 5*per)
	}
}
