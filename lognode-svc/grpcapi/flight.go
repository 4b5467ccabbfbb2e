package grpcapi

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	flightpb "github.com/apache/arrow-go/v18/arrow/flight/gen/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	"github.com/loamhq/loam/lognode-svc/arrowstream"
	"github.com/loamhq/loam/lognode-svc/auth"
	"github.com/loamhq/loam/lognode-svc/httpapi"
	"github.com/loamhq/loam/lognode-svc/reader"
	"github.com/loamhq/loam/lognode-svc/writer"
	"github.com/loamhq/loam/shared/arrowenc"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/streamapi"
)

// Arrow Flight (arrow.flight.protocol.FlightService) on the gRPC API's server, so TLS, the
// message size limit and API keys are those of loam.v1 (docs/arrow.md, "Arrow Flight"):
//
//   - GetFlightInfo / GetSchema of a PATH descriptor [namespace, stream]: the stream's
//     latest schema and one endpoint per partition, whose ticket reads the partition from
//     its log start to its high watermark;
//   - ListFlights: the arrow streams of the namespace the criteria's expression names
//     (empty: default);
//   - DoGet of a ticket (FlightTicket, JSON): the rows of a partition's offset range as
//     Arrow record batches of the stream's latest schema (rows of older versions have the
//     added columns null), projected to the ticket's columns;
//   - DoPut with a PATH descriptor [namespace, stream] or [namespace, stream, partition]:
//     each record batch is checked, placed as an HTTP Arrow IPC produce places rows and
//     committed before the next is read, and acknowledged by a PutResult whose
//     app_metadata is a FlightPutAck (JSON).
//
// Every call needs, with Config.Auth set, the metadata "authorization: Bearer <key>" of a
// key of the namespace (or admin), as loam.v1 calls do. Calls are admitted against the
// node's concurrency limit and DoPut batches against its in-flight byte budget, as
// Produce is. Errors are the loam.v1 statuses (errors.go: the API's interceptors map them).

// FlightTicket is a DoGet ticket: the JSON GetFlightInfo's endpoints carry, which a
// client may also write itself.
type FlightTicket struct {
	Namespace string `json:"namespace"`
	Stream    string `json:"stream"`
	Partition int32  `json:"partition"`
	// Offset is the first offset to read.
	Offset int64 `json:"offset"`
	// EndOffset is the offset to stop before; 0: the high watermark when DoGet starts.
	EndOffset int64 `json:"end_offset,omitempty"`
	// Columns projects the rows to these columns, in this order; empty: all.
	Columns []string `json:"columns,omitempty"`
}

// FlightPutAck is the app_metadata of the PutResult that acknowledges one record batch of
// a DoPut: the batch's index in the call (from 0), where its rows landed (a partition's
// rows take consecutive offsets from BaseOffset, in the batch's order) and the commit's
// consistency token.
type FlightPutAck struct {
	Batch      int64           `json:"batch"`
	Partitions []FlightPutPart `json:"partitions"`
	Token      string          `json:"token"`
}

// FlightPutPart is one partition's share of an acknowledged batch.
type FlightPutPart struct {
	Partition  int32 `json:"partition"`
	BaseOffset int64 `json:"base_offset"`
	Records    int64 `json:"records"`
}

// flightReadBytes is how much one DoGet reads from the bucket at a time (reader.ReadArrow
// then holds at most this plus one chunk).
const flightReadBytes = 4 << 20

type flightServer struct {
	flight.BaseFlightServer
	s       *Server
	schemas *arrowstream.Schemas // the API's (Server.arrowSchemas)
}

// registerFlight registers the Flight service on g.
func (s *Server) registerFlight(g grpc.ServiceRegistrar) {
	flightpb.RegisterFlightServiceServer(g, &flightServer{s: s, schemas: s.arrowSchemas()})
}

// begin admits a Flight call (the node's concurrency limit) and checks its key for ns.
func (f *flightServer) begin(ctx context.Context, ns string) (func(), error) {
	if f.s.cfg.Auth != nil {
		if err := f.s.checkKey(ctx, auth.Scope{Namespace: ns}); err != nil {
			return nil, err
		}
	}
	r, err := f.s.adm.admit()
	if err != nil {
		return nil, err
	}
	return r.release, nil
}

// arrowStream returns the arrow stream ns/name.
func (f *flightServer) arrowStream(ctx context.Context, ns, name string) (meta.Stream, error) {
	if err := required("namespace", ns, "stream", name); err != nil {
		return meta.Stream{}, err
	}
	st, err := f.s.cfg.Streams.Stream(ctx, ns, name)
	if err != nil {
		return st, err
	}
	if st.Encoding != meta.EncodingArrow {
		return st, badInput(streamapi.CodeInvalidArgument, "stream %q has encoding %s: Arrow Flight serves arrow streams", st.Name, st.Encoding)
	}
	return st, nil
}

// pathOf reads a PATH descriptor [namespace, stream] (and, if allowPartition, an
// optional partition).
func pathOf(d *flight.FlightDescriptor, allowPartition bool) (ns, name string, partition int32, err error) {
	partition = -1
	if d == nil || d.GetType() != flight.DescriptorPATH {
		return "", "", -1, badInput(streamapi.CodeInvalidArgument, "the flight descriptor must be a PATH [namespace, stream]")
	}
	p := d.GetPath()
	switch {
	case len(p) == 2:
	case len(p) == 3 && allowPartition:
		v, perr := strconv.ParseInt(p[2], 10, 32)
		if perr != nil || v < 0 {
			return "", "", -1, badInput(streamapi.CodeInvalidArgument, "descriptor path element 3 %q is not a partition number", p[2])
		}
		partition = int32(v)
	case allowPartition:
		return "", "", -1, badInput(streamapi.CodeInvalidArgument, "the descriptor path has %d elements: want [namespace, stream] or [namespace, stream, partition]", len(p))
	default:
		return "", "", -1, badInput(streamapi.CodeInvalidArgument, "the descriptor path has %d elements: want [namespace, stream]", len(p))
	}
	return p[0], p[1], partition, nil
}

// info describes stream st as a flight: its latest schema and one endpoint per partition.
func (f *flightServer) info(ctx context.Context, st meta.Stream) (*flight.FlightInfo, error) {
	sch, _, err := f.schemas.Get(ctx, st.ID, 0)
	if err != nil {
		return nil, err
	}
	_, parts, err := f.s.cfg.Meta.GetStream(ctx, st.Namespace, st.Name)
	if err != nil {
		return nil, err
	}
	out := &flight.FlightInfo{
		Schema:           flight.SerializeSchema(sch.Arrow(), memory.DefaultAllocator),
		FlightDescriptor: &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{st.Namespace, st.Name}},
		TotalBytes:       -1,
	}
	for _, p := range parts {
		t, _ := json.Marshal(FlightTicket{Namespace: st.Namespace, Stream: st.Name, Partition: p.Partition, Offset: p.LogStart, EndOffset: p.HighWatermark})
		out.Endpoint = append(out.Endpoint, &flight.FlightEndpoint{Ticket: &flight.Ticket{Ticket: t}})
		out.TotalRecords += p.HighWatermark - p.LogStart
	}
	return out, nil
}

// GetFlightInfo implements flight.FlightServer.
func (f *flightServer) GetFlightInfo(ctx context.Context, d *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	ns, name, _, err := pathOf(d, false)
	if err != nil {
		return nil, err
	}
	done, err := f.begin(ctx, ns)
	if err != nil {
		return nil, err
	}
	defer done()
	st, err := f.arrowStream(ctx, ns, name)
	if err != nil {
		return nil, err
	}
	return f.info(ctx, st)
}

// GetSchema implements flight.FlightServer.
func (f *flightServer) GetSchema(ctx context.Context, d *flight.FlightDescriptor) (*flight.SchemaResult, error) {
	ns, name, _, err := pathOf(d, false)
	if err != nil {
		return nil, err
	}
	done, err := f.begin(ctx, ns)
	if err != nil {
		return nil, err
	}
	defer done()
	st, err := f.arrowStream(ctx, ns, name)
	if err != nil {
		return nil, err
	}
	sch, _, err := f.schemas.Get(ctx, st.ID, 0)
	if err != nil {
		return nil, err
	}
	return &flight.SchemaResult{Schema: flight.SerializeSchema(sch.Arrow(), memory.DefaultAllocator)}, nil
}

// ListFlights implements flight.FlightServer: the criteria's expression is a namespace.
func (f *flightServer) ListFlights(c *flight.Criteria, fs flight.FlightService_ListFlightsServer) error {
	ctx := fs.Context()
	ns := string(c.GetExpression())
	if ns == "" {
		ns = meta.DefaultNS
	}
	done, err := f.begin(ctx, ns)
	if err != nil {
		return err
	}
	defer done()
	streams, err := f.s.cfg.Meta.ListStreams(ctx, ns)
	if err != nil {
		return err
	}
	for _, st := range streams {
		if st.Encoding != meta.EncodingArrow {
			continue
		}
		info, err := f.info(ctx, st)
		if errors.Is(err, meta.ErrStreamNotFound) {
			continue // deleted meanwhile
		}
		if err != nil {
			return err
		}
		if err := fs.Send(info); err != nil {
			return err
		}
	}
	return nil
}

// DoGet implements flight.FlightServer.
func (f *flightServer) DoGet(tk *flight.Ticket, fs flight.FlightService_DoGetServer) error {
	ctx := fs.Context()
	var t FlightTicket
	dec := json.NewDecoder(bytes.NewReader(tk.GetTicket()))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&t); err != nil {
		return badInput(streamapi.CodeInvalidArgument, "the ticket is not a JSON FlightTicket: %v", err)
	}
	done, err := f.begin(ctx, t.Namespace)
	if err != nil {
		return err
	}
	defer done()
	st, err := f.arrowStream(ctx, t.Namespace, t.Stream)
	if err != nil {
		return err
	}
	if t.Partition < 0 || t.Partition >= st.Partitions {
		return &inputError{code: codes.NotFound, reason: streamapi.CodePartitionNotFound,
			msg: fmt.Sprintf("partition %d does not exist: stream %q has partitions 0..%d", t.Partition, st.Name, st.Partitions-1)}
	}
	if t.Offset < 0 || (t.EndOffset != 0 && t.EndOffset < t.Offset) {
		return badInput(streamapi.CodeBadRequest, "the ticket's offsets [%d, %d) are not a range", t.Offset, t.EndOffset)
	}
	sch, version, err := f.schemas.Get(ctx, st.ID, 0)
	if err != nil {
		return err
	}
	as := sch.Arrow()
	proj, err := arrowenc.Project(as, t.Columns)
	if err != nil {
		return badInput(streamapi.CodeBadRequest, "columns: %v", err)
	}
	out := arrowenc.ProjectSchema(as, proj)
	all := len(proj) == as.NumFields()
	for i, c := range proj {
		all = all && c == i
	}
	end, off := t.EndOffset, t.Offset
	// A projection reads only its columns' byte ranges from segments (WAL chunks are read
	// whole); frames then hold those columns, matched to the output by name.
	var cols []string
	if !all {
		for _, fl := range out.Fields() {
			cols = append(cols, fl.Name)
		}
	}
	read := func(off int64) (reader.ArrowResult, error) {
		return arrowstream.ReadArrowColumns(ctx, f.s.cfg.Reader, reader.ArrowRead{StreamID: st.ID, Partition: t.Partition,
			Offset: off, EndOffset: t.EndOffset, Columns: cols, MaxBytes: flightReadBytes})
	}
	res, err := read(off)
	if err != nil {
		return err // an offset outside the log included: checks come before the schema is sent
	}
	if end == 0 {
		end = res.HighWatermark
	}
	head, err := schemaData(out)
	if err != nil {
		return err
	}
	if err := fs.Send(head); err != nil {
		return err
	}
	// Batches that are projected or cut are written by an IPC writer, whose own schema
	// message (the same) is not sent again.
	w := flight.NewRecordWriter(&afterSchema{DataStreamWriter: fs}, ipc.WithSchema(out), ipc.WithAllocator(memory.DefaultAllocator))
	defer w.Close()
	for {
		for _, c := range res.Chunks {
			frames, err := arrowenc.SplitPayload(c.Payload)
			if err != nil {
				return err
			}
			base := c.BaseOffset
			for _, fr := range frames {
				rows := int64(fr.Rows)
				if base+rows > off && base < end {
					// A whole frame of the latest version, all columns: its stored record
					// batch messages are sent as they are.
					sent := false
					if all && fr.SchemaID == version && base >= off && base+rows <= end {
						if sent, err = sendRaw(fs, fr); err != nil {
							return err
						}
					}
					if !sent {
						if err := writeDecoded(w, fr, base, off, end, out); err != nil {
							return err
						}
					}
				}
				base += rows
			}
		}
		next := res.NextOffset
		f.s.m.fetched.Add(float64(max(0, min(next, end)-off)))
		if len(res.Chunks) == 0 || next >= end || next <= off {
			return nil
		}
		off = next
		if res, err = read(off); err != nil {
			return err
		}
	}
}

// sendRaw sends a stored frame's record batch messages as FlightData, unless its messages
// are not what a frame holds (then the caller decodes it).
func sendRaw(fs flight.FlightService_DoGetServer, fr arrowenc.RawFrame) (bool, error) {
	raws, err := arrowenc.FrameMessages(fr.IPC)
	if err != nil {
		return false, nil
	}
	var rows int64
	for _, r := range raws {
		rows += r.Rows
	}
	if rows != int64(fr.Rows) {
		return false, nil
	}
	for _, r := range raws {
		if err := fs.Send(&flight.FlightData{DataHeader: r.Meta, DataBody: r.Body}); err != nil {
			return true, err
		}
	}
	return true, nil
}

// writeDecoded decodes a stored frame whose first row has offset base and writes its rows
// in [off, end) as out's columns (matched by name; a column the frame lacks, of an older
// schema version, is nulls), with w.
func writeDecoded(w *flight.Writer, fr arrowenc.RawFrame, base, off, end int64, out *arrow.Schema) error {
	frames, err := arrowenc.DecodePayload(fr.Bytes)
	if err != nil {
		return err
	}
	defer arrowenc.ReleaseFrames(frames)
	for _, f := range frames {
		for _, b := range f.Batches {
			rows := b.NumRows()
			from, to := max(0, off-base), min(rows, end-base)
			if from < to {
				pb := projectPadded(b, out, from, to)
				err := w.Write(pb)
				pb.Release()
				if err != nil {
					return err
				}
			}
			base += rows
		}
	}
	return nil
}

// schemaData is the FlightData of out's schema message.
func schemaData(out *arrow.Schema) (*flight.FlightData, error) {
	var c captureData
	w := flight.NewRecordWriter(&c, ipc.WithSchema(out), ipc.WithAllocator(memory.DefaultAllocator))
	if err := w.Close(); err != nil { // a writer that wrote nothing sends its schema on Close
		return nil, err
	}
	if c.first == nil {
		return nil, errors.New("grpcapi: flight: no schema message written")
	}
	return c.first, nil
}

type captureData struct{ first *flight.FlightData }

func (c *captureData) Send(fd *flight.FlightData) error {
	if c.first == nil {
		c.first = &flight.FlightData{DataHeader: bytes.Clone(fd.GetDataHeader()), DataBody: bytes.Clone(fd.GetDataBody())}
	}
	return nil
}

// afterSchema drops the first message its writer sends: the schema, already sent.
type afterSchema struct {
	flight.DataStreamWriter
	skipped bool
}

func (a *afterSchema) Send(fd *flight.FlightData) error {
	if !a.skipped {
		a.skipped = true
		return nil
	}
	return a.DataStreamWriter.Send(fd)
}

// projectPadded is rows [from, to) of b as out's columns, matched by name; a column b
// lacks (b is of an older schema version, which evolution only appends to) is nulls.
func projectPadded(b arrow.RecordBatch, out *arrow.Schema, from, to int64) arrow.RecordBatch {
	cols := make([]arrow.Array, out.NumFields())
	for i, fl := range out.Fields() {
		if idx := b.Schema().FieldIndices(fl.Name); len(idx) > 0 {
			cols[i] = array.NewSlice(b.Column(idx[0]), from, to)
		} else {
			cols[i] = array.MakeArrayOfNull(memory.DefaultAllocator, fl.Type, int(to-from))
		}
	}
	rb := array.NewRecordBatch(out, cols, to-from)
	for _, c := range cols {
		c.Release()
	}
	return rb
}

// DoPut implements flight.FlightServer.
func (f *flightServer) DoPut(ps flight.FlightService_DoPutServer) error {
	ctx := ps.Context()
	fd, err := ps.Recv()
	if err != nil {
		return err
	}
	ns, name, partition, err := pathOf(fd.GetFlightDescriptor(), true)
	if err != nil {
		return err
	}
	done, err := f.begin(ctx, ns)
	if err != nil {
		return err
	}
	defer done()
	st, err := f.arrowStream(ctx, ns, name)
	if err != nil {
		return err
	}
	if partition >= st.Partitions {
		return &inputError{code: codes.NotFound, reason: streamapi.CodePartitionNotFound,
			msg: fmt.Sprintf("partition %d does not exist: stream %q has partitions 0..%d", partition, st.Name, st.Partitions-1)}
	}
	wr, ok := f.s.cfg.Writers[st.Class]
	if !ok {
		return badInput(streamapi.CodeUnsupportedClass, "stream %q has class %q, which this node does not serve", st.Name, st.Class)
	}
	// The first message carries the schema: match it once to a version of the stream's.
	schemaMsg := encapsulate(nil, fd)
	as, _, err := arrowenc.ReadIPC(append(schemaMsg, eos...))
	if err != nil {
		return badInput(streamapi.CodeInvalidArgument, "the first FlightData is not an Arrow schema message: %v", err)
	}
	sch, version, err := f.schemas.Match(ctx, st, as)
	if errors.Is(err, arrowenc.ErrSchemaMismatch) {
		return badInput(streamapi.CodeInvalidRecord, "%v", err)
	}
	if err != nil {
		return err
	}
	return f.putLoop(ctx, ps, st, wr, sch, version, partition, schemaMsg)
}

// DoPut group commit: a receiver reads the client's messages ahead into a queue of
// putQueue messages (each held against the node's in-flight byte budget until it is
// acknowledged); the writer takes the first waiting batch and every batch already queued
// behind it, up to putGroupBatches and putGroupBytes, and commits them in one Write (one
// WAL object), then acknowledges each, in order. A client that sends batches without
// waiting for their acks gets one commit per group instead of one per batch; one that
// waits gets one per batch. Memory: putQueue + putGroupBatches messages per call, each at
// most the gRPC message limit, and within the in-flight budget.
const (
	putQueue        = 16
	putGroupBatches = 32
	putGroupBytes   = 16 << 20
)

type putMsg struct {
	fd  *flight.FlightData
	n   int64 // bytes held against the in-flight budget
	err error // the receive's end: io.EOF, or why it failed
}

func (f *flightServer) putLoop(ctx context.Context, ps flight.FlightService_DoPutServer, st meta.Stream, wr writer.Writer, sch *arrowenc.Schema, version uint32, partition int32, schemaMsg []byte) error {
	ctx, cancel := context.WithCancel(ctx)
	queue := make(chan putMsg, putQueue)
	adm := f.s.cfg.Admission
	go func() {
		defer close(queue)
		for {
			fd, err := ps.Recv()
			m := putMsg{fd: fd, err: err}
			if err == nil {
				if len(fd.GetDataHeader()) == 0 {
					continue // app_metadata only: nothing to write
				}
				m.n = int64(len(fd.GetDataHeader()) + len(fd.GetDataBody()))
				if held, ok := adm.Hold(m.n); !ok {
					m = putMsg{err: &overloadError{fmt.Sprintf("the node holds %d bytes of produce messages and request bodies; %d more would pass its in-flight budget of %d bytes: retry later", held, m.n, f.s.cfg.Limits.MaxInflightBodyBytes)}}
				}
			}
			select {
			case queue <- m:
			case <-ctx.Done():
				if m.n > 0 {
					adm.Drop(m.n)
				}
				return
			}
			if m.err != nil {
				return
			}
		}
	}()
	defer func() {
		cancel()
		// What was read ahead and not written. The receiver may be blocked in Recv until
		// the call ends, so it is drained without waiting for it.
		go func() {
			for m := range queue {
				if m.n > 0 {
					adm.Drop(m.n)
				}
			}
		}()
	}()
	var batch, rows int64
	for {
		var m putMsg
		select {
		case m = <-queue:
		case <-ctx.Done():
			return ctx.Err()
		}
		if m.err != nil {
			if errors.Is(m.err, io.EOF) {
				return nil
			}
			return m.err
		}
		group, size := []putMsg{m}, m.n
		var last *putMsg
	more:
		for len(group) < putGroupBatches && size < putGroupBytes {
			select {
			case n := <-queue:
				if n.err != nil {
					last = &n
					break more
				}
				group = append(group, n)
				size += n.n
			default:
				break more
			}
		}
		err := f.putGroup(ctx, ps, st, wr, sch, version, partition, schemaMsg, group, &batch, &rows)
		for _, g := range group {
			adm.Drop(g.n)
		}
		if err != nil {
			return err
		}
		if last != nil {
			if errors.Is(last.err, io.EOF) {
				return nil
			}
			return last.err
		}
	}
}

// putGroup decodes, checks and places each batch of group, commits them in one Write and
// acknowledges each in order. A batch refused before the Write ends the call after the
// batches before it are committed and acknowledged.
func (f *flightServer) putGroup(ctx context.Context, ps flight.FlightService_DoPutServer, st meta.Stream, wr writer.Writer, sch *arrowenc.Schema, version uint32, partition int32, schemaMsg []byte, group []putMsg, batch, rows *int64) error {
	var (
		plans   []*arrowstream.Plan
		refused error
	)
	for _, m := range group {
		plan, err := f.putPlan(ctx, st, sch, version, partition, *batch+int64(len(plans)), *rows, encapsulate(append([]byte(nil), schemaMsg...), m.fd))
		if err != nil {
			refused = err
			break
		}
		plans = append(plans, plan)
		*rows += int64(len(plan.RowPart))
	}
	if len(plans) > 0 {
		merged := &arrowstream.Plan{}
		for _, p := range plans {
			merged.Requests = append(merged.Requests, p.Requests...)
			merged.Parts = append(merged.Parts, p.Parts...)
		}
		var (
			outs    []arrowstream.Outcome
			token   uint64
			partial bool
		)
		if len(merged.Requests) > 0 { // else batches of no rows only
			wctx, cancel := context.WithTimeout(ctx, f.s.cfg.Limits.ProduceWait)
			var err error
			outs, token, partial, err = arrowstream.Write(wctx, wr, merged)
			cancel()
			if err != nil {
				return &writeFailure{err}
			}
		}
		var failed error
		for _, p := range plans {
			ack := FlightPutAck{Batch: *batch, Partitions: []FlightPutPart{}, Token: httpapi.FormatToken(token)}
			for _, o := range outs[:len(p.Parts)] {
				if o.Err != nil {
					failed = o.Err
					continue
				}
				ack.Partitions = append(ack.Partitions, FlightPutPart{Partition: o.Partition, BaseOffset: o.BaseOffset, Records: o.Rows})
				f.s.m.records.Add(float64(o.Rows))
			}
			outs = outs[len(p.Parts):]
			if err := f.ack(ps, ack); err != nil {
				return err
			}
			*batch++
		}
		if partial {
			// The committed partitions are acknowledged; the call ends with the refusal.
			return &writeFailure{failed}
		}
	}
	return refused
}

// putPlan decodes and checks one DoPut record batch (msg: the schema message and the
// batch's, encapsulated) and places its rows; firstRow numbers them in errors.
func (f *flightServer) putPlan(ctx context.Context, st meta.Stream, sch *arrowenc.Schema, version uint32, partition int32, batch, firstRow int64, msg []byte) (*arrowstream.Plan, error) {
	if a, ok := f.s.cfg.Streams.(ingestAdmitter); ok {
		if err := a.AdmitIngest(ctx, st.Namespace, len(msg)); err != nil {
			return nil, err
		}
	}
	_, batches, err := arrowenc.ReadIPC(append(msg, eos...))
	if err != nil {
		return nil, badInput(streamapi.CodeInvalidRecord, "record batch %d: %v", batch, err)
	}
	defer func() {
		for _, b := range batches {
			b.Release()
		}
	}()
	var got int64
	for _, b := range batches {
		got += b.NumRows()
	}
	if got > int64(f.s.cfg.Limits.MaxRecords) {
		return nil, &inputError{code: codes.ResourceExhausted, reason: streamapi.CodeRequestTooLarge,
			msg: fmt.Sprintf("record batch %d has %d rows, more than the limit of %d records", batch, got, f.s.cfg.Limits.MaxRecords)}
	}
	if got == 0 {
		return &arrowstream.Plan{}, nil // acknowledged with no partitions
	}
	plan, err := arrowstream.Build(st, sch, version, batches, arrowstream.Placement{Partition: partition, Sticky: int32(f.s.sticky.Add(1) % uint32(st.Partitions))}, f.s.cfg.Now().UnixMilli(), firstRow)
	switch {
	case errors.Is(err, arrowenc.ErrInvalidIPC), errors.Is(err, arrowenc.ErrSchemaMismatch), errors.Is(err, arrowstream.ErrNoRows):
		return nil, badInput(streamapi.CodeInvalidRecord, "record batch %d: %v", batch, err)
	case err != nil:
		return nil, err
	}
	f.s.m.bytes.Add(float64(len(msg)))
	return plan, nil
}

func (f *flightServer) ack(ps flight.FlightService_DoPutServer, a FlightPutAck) error {
	b, err := json.Marshal(a)
	if err != nil {
		return err
	}
	return ps.Send(&flight.PutResult{AppMetadata: b})
}

// eos is the Arrow IPC end-of-stream marker.
var eos = []byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0}

// encapsulate appends fd's message in the Arrow IPC stream framing: the continuation
// marker, the metadata length (padded to 8 bytes), the metadata, its padding and the body.
func encapsulate(dst []byte, fd *flight.FlightData) []byte {
	h := fd.GetDataHeader()
	pad := (8 - (8+len(h))%8) % 8
	dst = append(dst, 0xff, 0xff, 0xff, 0xff)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(h)+pad))
	dst = append(dst, h...)
	dst = append(dst, make([]byte, pad)...)
	return append(dst, fd.GetDataBody()...)
}
