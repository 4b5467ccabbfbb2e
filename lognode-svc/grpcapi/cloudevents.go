package grpcapi

import (
	"context"
	"errors"
	"net/http"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/loamhq/loam/lognode-svc/httpapi"
	"github.com/loamhq/loam/shared/cloudevents"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/streamapi"
	"github.com/loamhq/loam/shared/streamapi/loamv1pb"
)

// CloudEventService (loam.v1): ProduceCloudEvents takes events in any CloudEvents format
// but HTTP binary mode and runs the HTTP API's ingest (httpapi.IngestEvents: validation,
// placement, the dedup ledger), so both transports answer alike. It answers per event,
// in-flight events included (the HTTP API's 409 is a per-event status here), and fails
// only for invalid events (INVALID_ARGUMENT invalid_event), a namespace over its ledger
// cap (RESOURCE_EXHAUSTED dedup_ledger_full) or an unavailable log.

// eventIngester is the catalog's ingest entry (httpapi.Server).
type eventIngester interface {
	IngestEventsTo(ctx context.Context, st meta.Stream, events []*cloudevents.Event, partition int32) (httpapi.EventsResult, error)
	AdmitIngest(ctx context.Context, ns string, n int) error
}

type cloudEventServer struct {
	loamv1pb.UnimplementedCloudEventServiceServer
	s *Server
}

func (c cloudEventServer) ProduceCloudEvents(ctx context.Context, req *loamv1pb.ProduceCloudEventsRequest) (*loamv1pb.ProduceCloudEventsResponse, error) {
	if err := required("namespace", req.GetNamespace(), "stream", req.GetStream()); err != nil {
		return nil, err
	}
	in, ok := c.s.cfg.Streams.(eventIngester)
	if !ok {
		return nil, &inputError{code: codes.Unimplemented, reason: streamapi.CodeNotFound, msg: "this node serves no CloudEvents ingest"}
	}
	h := http.Header{}
	h.Set("Content-Type", req.GetContentType())
	switch cloudevents.MediaType(req.GetContentType()) {
	case cloudevents.MediaJSON, cloudevents.MediaBatchJSON, cloudevents.MediaProto, cloudevents.MediaBatchProto:
	default:
		return nil, badInput(streamapi.CodeUnsupportedMedia, "content_type %q is not a CloudEvents format: send %s, %s, %s or %s",
			req.GetContentType(), cloudevents.MediaProto, cloudevents.MediaBatchProto, cloudevents.MediaJSON, cloudevents.MediaBatchJSON)
	}
	events, _, err := httpapi.DecodeEvents(h, req.GetBody())
	if err != nil {
		return nil, badInput(httpapi.CodeInvalidEvent, "%v", err)
	}
	partition := int32(-1)
	if req.Partition != nil {
		if req.GetPartition() < 0 {
			return nil, badInput(streamapi.CodePartitionNotFound, "partition %d does not exist", req.GetPartition())
		}
		partition = req.GetPartition()
	}
	st, err := c.s.cfg.Streams.Stream(ctx, req.GetNamespace(), req.GetStream())
	if err != nil {
		return nil, err
	}
	if err := in.AdmitIngest(ctx, st.Namespace, len(req.GetBody())); err != nil {
		return nil, err
	}
	res, err := in.IngestEventsTo(ctx, st, events, partition)
	if err != nil {
		return nil, ingestError(err)
	}
	out := &loamv1pb.ProduceCloudEventsResponse{Events: make([]*loamv1pb.CloudEventResult, len(res.Events))}
	for i, o := range res.Events {
		s := loamv1pb.CloudEventStatus_CLOUD_EVENT_STATUS_APPENDED
		switch o.Status {
		case meta.EventDuplicate:
			s = loamv1pb.CloudEventStatus_CLOUD_EVENT_STATUS_DUPLICATE
		case meta.EventInFlight:
			s = loamv1pb.CloudEventStatus_CLOUD_EVENT_STATUS_IN_FLIGHT
		}
		out.Events[i] = &loamv1pb.CloudEventResult{Status: s, Partition: o.Partition, Offset: o.Offset}
	}
	if res.Token > 0 {
		out.Token = httpapi.FormatToken(res.Token)
	}
	return out, nil
}

// ingestError maps an error of httpapi.IngestEvents by the HTTP API's status and code
// (its input errors and write outcomes are its own types), with the same ErrorInfo and
// RetryInfo as every status of this API.
func ingestError(err error) error {
	status, d := httpapi.DescribeError(err)
	a := answer{code: codes.Internal, reason: d.Code, msg: d.Message, retriable: d.Retriable}
	switch {
	case errors.Is(err, meta.ErrEventLedgerFull):
		a.code, a.reason = codes.ResourceExhausted, httpapi.CodeDedupLedgerFull
	case status == http.StatusNotFound:
		a.code = codes.NotFound
	case status == http.StatusTooManyRequests:
		a.code = codes.ResourceExhausted
	case status == http.StatusServiceUnavailable:
		a.code = codes.Unavailable
	case status >= 400 && status < 500:
		a.code = codes.InvalidArgument
	}
	switch d.Code {
	case streamapi.CodeCommitUnknown:
		a.mayHaveHappened = yes
	case streamapi.CodeCommitFailed:
		a.mayHaveHappened = no
	}
	return statusError{a}
}

// statusError is an answer already mapped: statusOf takes its GRPCStatus as it is.
type statusError struct{ a answer }

func (e statusError) Error() string              { return e.a.msg }
func (e statusError) GRPCStatus() *status.Status { return answerStatus(e.a) }
