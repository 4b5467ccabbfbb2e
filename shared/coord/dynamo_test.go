package coord_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/loamhq/loam/shared/coord"
	"github.com/loamhq/loam/shared/coord/coordtest"
	"github.com/loamhq/loam/tests/testserver"
)

var tableSeq atomic.Int64

// serialHTTP sends one request at a time. moto applies each DynamoDB request without a
// lock (its backends are plain Python objects behind a threaded HTTP server), so two
// concurrent conditional writes can both pass their condition and an UpdateItem can
// answer another request's value. Serializing the requests gives the suite the per-item
// atomicity real DynamoDB provides; the concurrency tests still prove that our condition
// expressions admit exactly one winner and lose no update.
type serialHTTP struct {
	mu     sync.Mutex
	client *http.Client
}

func (s *serialHTTP) Do(req *http.Request) (*http.Response, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, err
	}
	// Read the body under the lock, so the next request starts after this one is done.
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return resp, nil
}

// one serializer per moto server: requests to different tables are serialized too, which
// keeps moto's shared state safe.
var motoClients sync.Map // endpoint → *serialHTTP

func dynamoConfig(endpoint string) coord.DynamoConfig {
	hc, _ := motoClients.LoadOrStore(endpoint, &serialHTTP{client: &http.Client{}})
	return coord.DynamoConfig{
		HTTPClient:  hc.(*serialHTTP),
		Table:       fmt.Sprintf("coord-test-%d", tableSeq.Add(1)),
		Endpoint:    endpoint,
		Region:      "us-east-1",
		AccessKey:   "test",
		SecretKey:   "test",
		CreateTable: true,
	}
}

// TestDynamo runs against one moto_server: the suite (a new table per subtest), then the
// table and item layout checks.
func TestDynamo(t *testing.T) {
	url := testserver.StartMoto(t)
	t.Run("Suite", func(t *testing.T) {
		coordtest.Run(t, func(t *testing.T, opts ...coord.Option) coord.Store {
			s, err := coord.NewDynamo(t.Context(), dynamoConfig(url), opts...)
			if err != nil {
				t.Fatal(err)
			}
			return s
		})
	})
	t.Run("Table", func(t *testing.T) { testDynamoTable(t, url) })
	t.Run("LostAnswer", func(t *testing.T) { testDynamoLostAnswer(t, url) })
}

// dropAnswer performs requests but, while armed, loses the answer of the next PutItem
// with a connection reset, which the SDK retries.
type dropAnswer struct {
	next  aws.HTTPClient
	armed atomic.Bool
}

func (d *dropAnswer) Do(req *http.Request) (*http.Response, error) {
	resp, err := d.next.Do(req)
	if err == nil && strings.HasSuffix(req.Header.Get("X-Amz-Target"), ".PutItem") && d.armed.CompareAndSwap(true, false) {
		resp.Body.Close()
		return nil, errors.New("read tcp 127.0.0.1: connection reset by peer")
	}
	return resp, err
}

// testDynamoLostAnswer: a conditional PutItem that took effect but whose answer was lost
// is retried by the SDK and fails its condition. Store.Put reports that (documented);
// Notifications.Claim recognises its own token and still reports the claim as first.
func testDynamoLostAnswer(t *testing.T, url string) {
	ctx := t.Context()
	cfg := dynamoConfig(url)
	drop := &dropAnswer{next: cfg.HTTPClient}
	cfg.HTTPClient = drop
	s, err := coord.NewDynamo(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	drop.armed.Store(true)
	_, err = s.Put(ctx, coord.Item{PK: "p", SK: "k"}, coord.IfAbsent)
	if !errors.Is(err, coord.ErrConditionFailed) || drop.armed.Load() {
		t.Fatalf("Put IfAbsent with a lost answer = %v (armed %v); want ErrConditionFailed after a retry", err, drop.armed.Load())
	}
	if _, err := s.Get(ctx, "p", "k"); err != nil {
		t.Fatalf("the first attempt did not write: %v", err)
	}

	n := coord.Notifications{Store: s}
	drop.armed.Store(true)
	first, err := n.Claim(ctx, "obj@1", time.Minute)
	if err != nil || !first || drop.armed.Load() {
		t.Fatalf("Claim with a lost answer = %v, %v (armed %v); want first", first, err, drop.armed.Load())
	}
	if first, err := n.Claim(ctx, "obj@1", time.Minute); err != nil || first {
		t.Fatalf("second Claim = %v, %v", first, err)
	}
}

// testDynamoTable checks what CreateTable sets up and the stored item layout: the TTL
// attribute DynamoDB expires items by, and the attribute names other tools see.
func testDynamoTable(t *testing.T, url string) {
	ctx := t.Context()
	cfg := dynamoConfig(url)
	s, err := coord.NewDynamo(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// CreateTable on an existing table is a no-op.
	s2, err := coord.NewDynamo(ctx, cfg)
	if err != nil {
		t.Fatalf("NewDynamo on an existing table: %v", err)
	}
	s2.Close()

	c := s.Client()
	desc, err := c.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(cfg.Table)})
	if err != nil {
		t.Fatal(err)
	}
	tbl := desc.Table
	if tbl.TableStatus != types.TableStatusActive || len(tbl.KeySchema) != 2 ||
		aws.ToString(tbl.KeySchema[0].AttributeName) != "pk" || tbl.KeySchema[0].KeyType != types.KeyTypeHash ||
		aws.ToString(tbl.KeySchema[1].AttributeName) != "sk" || tbl.KeySchema[1].KeyType != types.KeyTypeRange {
		t.Fatalf("table: status %s, keys %+v", tbl.TableStatus, tbl.KeySchema)
	}
	if tbl.BillingModeSummary == nil || tbl.BillingModeSummary.BillingMode != types.BillingModePayPerRequest {
		t.Fatalf("billing mode %+v", tbl.BillingModeSummary)
	}
	ttl, err := c.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(cfg.Table)})
	if err != nil {
		t.Fatal(err)
	}
	if d := ttl.TimeToLiveDescription; d == nil || d.TimeToLiveStatus != types.TimeToLiveStatusEnabled || aws.ToString(d.AttributeName) != "expires_at" {
		t.Fatalf("ttl %+v", d)
	}

	exp := time.Now().Add(90 * time.Second)
	put, err := s.Put(ctx, coord.Item{PK: "p", SK: "s", ExpiresAt: exp,
		Attrs: map[string]string{"zone": "a"}, Counters: map[string]int64{"n": 4}}, coord.Condition{})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := c.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(cfg.Table),
		Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "p"}, "sk": &types.AttributeValueMemberS{Value: "s"}}})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"pk": "S:p", "sk": "S:s", "ver": "N:" + strconv.FormatInt(put.Version, 10),
		"expires_at": "N:" + strconv.FormatInt(put.ExpiresAt.Unix(), 10),
		"a_zone":     "S:a", "c_n": "N:4",
	}
	if len(raw.Item) != len(want) {
		t.Fatalf("stored attributes %v, want %v", raw.Item, want)
	}
	for name, w := range want {
		var got string
		switch v := raw.Item[name].(type) {
		case *types.AttributeValueMemberS:
			got = "S:" + v.Value
		case *types.AttributeValueMemberN:
			got = "N:" + v.Value
		default:
			got = fmt.Sprintf("%T", v)
		}
		if got != w {
			t.Errorf("attribute %s = %s, want %s", name, got, w)
		}
	}
	if put.ExpiresAt.Unix() < exp.Unix() || put.ExpiresAt.Unix() > exp.Unix()+1 {
		t.Fatalf("expires_at %d for %v", put.ExpiresAt.Unix(), exp)
	}
}
