package grpcapi_test

import (
	"net/http"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/loamhq/loam/lognode-svc/httpapi"
	"github.com/loamhq/loam/shared/streamapi/loamv1pb"
)

// TestArrowStreamRefused: gRPC produce and fetch of an arrow stream are refused with a
// clear error, so no Kafka-encoded chunk lands in an arrow stream.
func TestArrowStreamRefused(t *testing.T) {
	e := start(t, httpapi.Limits{})
	resp, err := http.Post(e.http+"/v1/namespaces/default/streams", "application/json", strings.NewReader(
		`{"name":"a","encoding":"arrow","schema":{"fields":[{"name":"id","type":"int64","nullable":false}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 201 {
		t.Fatalf("create: %d", resp.StatusCode)
	}
	c := ctx(t)
	_, err = e.records.Produce(c, &loamv1pb.ProduceRequest{Namespace: "default", Stream: "a", Records: kafkaRecords()})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), `stream "a" is an arrow stream`) {
		t.Fatalf("produce: %v", err)
	}
	_, err = e.records.Fetch(c, &loamv1pb.FetchRequest{Namespace: "default", Stream: "a", Partition: 0})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), `stream "a" is an arrow stream`) {
		t.Fatalf("fetch: %v", err)
	}
}
