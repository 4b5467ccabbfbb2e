package streamapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/loamhq/loam/shared/recordbatch"
)

// DefaultTimeout bounds every call; Fetch adds its maxWait on top.
const DefaultTimeout = 30 * time.Second

// Client calls one log node's native HTTP API. It is safe for concurrent use.
type Client struct {
	base      string // scheme://host[/prefix], no trailing slash
	hc        *http.Client
	apiKey    string
	userAgent string
	timeout   time.Duration
	json      bool                    // WithJSON: produce and fetch in JSON
	codec     recordbatch.Compression // WithCompression
	now       func() time.Time
	parts     partitionCache
}

// Option configures a Client.
type Option func(*Client)

// WithAPIKey sends key as "Authorization: Bearer <key>" on every request.
func WithAPIKey(key string) Option { return func(c *Client) { c.apiKey = key } }

// WithHTTPClient uses hc instead of the client's own. Its Timeout, if set, must exceed
// the longest Fetch maxWait.
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.hc = hc } }

// WithTimeout sets the per-call timeout (default DefaultTimeout); d <= 0 means none.
func WithTimeout(d time.Duration) Option { return func(c *Client) { c.timeout = d } }

// WithJSON makes Produce and Fetch use the JSON bodies instead of the binary fast path
// (RecordBatch v2 bytes, MediaRecordBatch), the default.
func WithJSON() Option { return func(c *Client) { c.json = true } }

// WithCompression compresses the batches Produce sends on the binary path with codec c
// (default recordbatch.None). It has no effect with WithJSON.
func WithCompression(codec recordbatch.Compression) Option {
	return func(c *Client) { c.codec = codec }
}

// WithUserAgent sets the User-Agent header (default "loam-streamapi-go").
func WithUserAgent(ua string) Option { return func(c *Client) { c.userAgent = ua } }

// NewClient returns a client of the API at baseURL, an http or https URL such as
// "http://127.0.0.1:8080" (a path prefix is kept, for servers behind a proxy).
func NewClient(baseURL string, opts ...Option) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil {
		return nil, fmt.Errorf("streamapi: new client: %w: %w", ErrInvalidArgument, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("streamapi: new client: %w: base URL %q is not http(s)://host[:port]", ErrInvalidArgument, baseURL)
	}
	if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return nil, fmt.Errorf("streamapi: new client: %w: base URL %q has a query, fragment or user info", ErrInvalidArgument, baseURL)
	}
	c := &Client{
		base:      strings.TrimRight(u.Scheme+"://"+u.Host+u.EscapedPath(), "/"),
		userAgent: "loam-streamapi-go",
		timeout:   DefaultTimeout,
		now:       time.Now,
	}
	for _, o := range opts {
		o(c)
	}
	if c.codec < recordbatch.None || c.codec > recordbatch.Zstd {
		return nil, fmt.Errorf("streamapi: new client: %w: compression %v", ErrInvalidArgument, c.codec)
	}
	if c.hc == nil {
		c.hc = &http.Client{Transport: newTransport()}
	}
	return c, nil
}

// newTransport is http.DefaultTransport's settings with bounded dials and enough idle
// connections per host for one long-poll per partition.
func newTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DialContext = (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	t.TLSHandshakeTimeout = 10 * time.Second
	t.MaxIdleConns = 256
	t.MaxIdleConnsPerHost = 64
	return t
}

// BaseURL returns the base URL requests go to.
func (c *Client) BaseURL() string { return c.base }

// CreateStream creates a stream in namespace ns (POST /v1/namespaces/{ns}/streams).
func (c *Client) CreateStream(ctx context.Context, ns string, req CreateStreamRequest) (Stream, error) {
	var st Stream
	if err := checkNames("create stream", ns, req.Name); err != nil {
		return st, err
	}
	err := c.do(ctx, "create stream", http.MethodPost, streamsPath(ns), nil, req, &st, 0)
	return st, err
}

// ListStreams lists the streams of namespace ns (GET /v1/namespaces/{ns}/streams). List
// items carry no PartitionInfo.
func (c *Client) ListStreams(ctx context.Context, ns string) ([]Stream, error) {
	if err := checkNames("list streams", ns); err != nil {
		return nil, err
	}
	var res ListStreamsResponse
	if err := c.do(ctx, "list streams", http.MethodGet, streamsPath(ns), nil, nil, &res, 0); err != nil {
		return nil, err
	}
	return res.Streams, nil
}

// GetStream describes one stream, with each partition's log start and high watermark
// (GET /v1/namespaces/{ns}/streams/{stream}).
func (c *Client) GetStream(ctx context.Context, ns, stream string) (Stream, error) {
	var st Stream
	if err := checkNames("get stream", ns, stream); err != nil {
		return st, err
	}
	err := c.do(ctx, "get stream", http.MethodGet, streamPath(ns, stream), nil, nil, &st, 0)
	return st, err
}

// PatchStream changes a stream's settings; nil fields stay (PATCH …/streams/{stream}).
func (c *Client) PatchStream(ctx context.Context, ns, stream string, req PatchStreamRequest) (Stream, error) {
	var st Stream
	if err := checkNames("patch stream", ns, stream); err != nil {
		return st, err
	}
	err := c.do(ctx, "patch stream", http.MethodPatch, streamPath(ns, stream), nil, req, &st, 0)
	return st, err
}

// DeleteStream deletes a stream and its records (DELETE …/streams/{stream}).
func (c *Client) DeleteStream(ctx context.Context, ns, stream string) error {
	if err := checkNames("delete stream", ns, stream); err != nil {
		return err
	}
	return c.do(ctx, "delete stream", http.MethodDelete, streamPath(ns, stream), nil, nil, nil, 0)
}

// Produce appends records to a stream (POST …/streams/{stream}/records) and returns each
// record's partition and offset in request order. A record without Partition goes where
// Kafka's default partitioner puts it: murmur2 of its key modulo the partition count, or,
// keyless, together with the request's other keyless records to one partition the server
// picks round-robin. Values are sent verbatim (a JSON value's text is not re-encoded). A
// Value that is not valid JSON fails with ErrInvalidRecord before sending.
//
// By default records travel as RecordBatch v2 bytes, one request per partition the records
// go to (sent at once, at most 16 in flight); keyed records without Partition make the
// client learn the stream's partition count (GetStream, kept for PartitionCacheTTL). When
// the records span several partitions and one request fails while another committed, the
// answer carries each record's outcome and the error wraps ErrPartialCommit. WithJSON sends
// one JSON request instead.
func (c *Client) Produce(ctx context.Context, ns, stream string, records []Record) (ProduceResponse, error) {
	var res ProduceResponse
	if err := checkNames("produce", ns, stream); err != nil {
		return res, err
	}
	if len(records) == 0 {
		return res, fmt.Errorf("streamapi: produce %s/%s: %w: no records", ns, stream, ErrInvalidArgument)
	}
	for i, r := range records {
		if (r.Value != nil && r.ValueBase64 != nil) || (r.Key != nil && r.KeyBase64 != nil) {
			return res, fmt.Errorf("streamapi: produce %s/%s: record %d: both text and base64 forms: %w", ns, stream, i, ErrInvalidRecord)
		}
	}
	if !c.json {
		return c.produceBinary(ctx, ns, stream, records)
	}
	body, err := appendProduceBody(nil, records)
	if err != nil {
		return res, fmt.Errorf("streamapi: produce %s/%s: %w", ns, stream, err)
	}
	err = c.do(ctx, "produce", http.MethodPost, streamPath(ns, stream)+"/records", nil, rawBody(body), &res, 0)
	if err != nil {
		return res, err
	}
	if len(res.Offsets) != len(records) {
		return res, fmt.Errorf("streamapi: produce %s/%s: %w: %d offsets for %d records", ns, stream, ErrBadResponse, len(res.Offsets), len(records))
	}
	refused := 0
	for _, o := range res.Offsets {
		if o.Error != nil {
			refused++
		}
	}
	if refused > 0 {
		return res, fmt.Errorf("streamapi: produce %s/%s: %w (%d of %d records refused)", ns, stream, ErrPartialCommit, refused, len(records))
	}
	return res, nil
}

// Fetch reads records of one partition from offset on
// (GET …/streams/{stream}/partitions/{p}/records). maxBytes <= 0 leaves the size to the
// server. maxWait is the long-poll: when no record at offset exists yet the server waits up
// to maxWait for one (0: answer at once; < 0: the server's default). Records whose
// Partition the server left out get it filled in.
func (c *Client) Fetch(ctx context.Context, ns, stream string, partition int32, offset int64, maxBytes int32, maxWait time.Duration) (FetchResponse, error) {
	var res FetchResponse
	if err := checkNames("fetch", ns, stream); err != nil {
		return res, err
	}
	if partition < 0 || offset < 0 {
		return res, fmt.Errorf("streamapi: fetch %s/%s/%d@%d: %w: negative partition or offset", ns, stream, partition, offset, ErrInvalidArgument)
	}
	q := url.Values{}
	q.Set("offset", strconv.FormatInt(offset, 10))
	if maxBytes > 0 {
		q.Set("max_bytes", strconv.FormatInt(int64(maxBytes), 10))
	}
	var extra time.Duration
	if maxWait >= 0 {
		q.Set("max_wait_ms", strconv.FormatInt(maxWait.Milliseconds(), 10))
		extra = maxWait
	}
	path := streamPath(ns, stream) + "/partitions/" + strconv.FormatInt(int64(partition), 10) + "/records"
	if c.json {
		if err := c.do(ctx, "fetch", http.MethodGet, path, q, nil, &res, extra); err != nil {
			return res, err
		}
	} else {
		var err error
		if res, err = c.fetchBinary(ctx, path, q, offset, extra); err != nil {
			return res, err
		}
	}
	for i := range res.Records {
		if res.Records[i].Partition == nil {
			p := partition
			res.Records[i].Partition = &p
		}
	}
	return res, nil
}

func streamsPath(ns string) string { return "/v1/namespaces/" + url.PathEscape(ns) + "/streams" }

func streamPath(ns, stream string) string { return streamsPath(ns) + "/" + url.PathEscape(stream) }

// checkNames refuses namespace and stream names that would address another route once in
// a URL path: "", "." and "..".
func checkNames(op string, names ...string) error {
	for _, n := range names {
		if n == "" || n == "." || n == ".." {
			return fmt.Errorf("streamapi: %s: %w: namespace or stream name %q", op, ErrInvalidArgument, n)
		}
	}
	return nil
}

// rawBody is a request body already encoded as JSON.
type rawBody []byte

// batchBody is a request body of RecordBatch v2 bytes (MediaRecordBatch).
type batchBody []byte

// binaryAnswer asks do for the MediaRecordBatch answer: its body and headers.
type binaryAnswer struct {
	header http.Header
	body   []byte
}

// maxBinaryAnswer bounds the body of a binary fetch answer the client reads: the largest
// max_bytes plus a batch over it.
const maxBinaryAnswer = 128 << 20

// do sends one request and decodes a 2xx JSON answer into out (nil: discard the body).
// extra lengthens the call's timeout (a fetch's long-poll).
func (c *Client) do(ctx context.Context, op, method, path string, q url.Values, in, out any, extra time.Duration) error {
	target := c.base + path
	if len(q) > 0 {
		target += "?" + q.Encode()
	}
	var body io.Reader
	switch in := in.(type) {
	case nil:
	case rawBody:
		body = bytes.NewReader(in)
	case batchBody:
		body = bytes.NewReader(in)
	default:
		b, err := marshalJSON(in)
		if err != nil {
			return fmt.Errorf("streamapi: %s %s: encode request: %w: %w", op, path, ErrInvalidArgument, err)
		}
		body = bytes.NewReader(b)
	}
	callCtx := ctx
	if c.timeout > 0 {
		var cancel context.CancelFunc
		callCtx, cancel = context.WithTimeout(ctx, c.timeout+extra)
		defer cancel()
	}
	req, err := http.NewRequestWithContext(callCtx, method, target, body)
	if err != nil {
		return fmt.Errorf("streamapi: %s %s: %w: %w", op, path, ErrInvalidArgument, err)
	}
	bin, _ := out.(*binaryAnswer)
	if bin != nil {
		req.Header.Set("Accept", MediaRecordBatch+", application/json")
	} else {
		req.Header.Set("Accept", "application/json")
	}
	switch in.(type) {
	case nil:
	case batchBody:
		req.Header.Set("Content-Type", MediaRecordBatch)
	default:
		req.Header.Set("Content-Type", "application/json")
	}
	if c.userAgent != "" {
		req.Header.Set("User-Agent", c.userAgent)
	}
	if c.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.apiKey)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return c.netErr(ctx, op, path, err)
	}
	defer func() {
		// Drain a little so the connection can be reused, then close.
		_, _ = io.CopyN(io.Discard, resp.Body, 4<<10)
		_ = resp.Body.Close()
	}()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		// A body cut short still leaves the status, which says what happened.
		b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		return fmt.Errorf("streamapi: %s %s: %w", op, path, parseAPIError(resp.StatusCode, b))
	}
	if out == nil {
		return nil
	}
	if bin != nil {
		if ct := resp.Header.Get("Content-Type"); !IsMediaRecordBatch(ct) {
			return fmt.Errorf("streamapi: %s %s: %w: answer of Content-Type %q, want %s", op, path, ErrBadResponse, ct, MediaRecordBatch)
		}
		b, err := io.ReadAll(io.LimitReader(resp.Body, maxBinaryAnswer+1))
		if err != nil {
			return c.netErr(ctx, op, path, err)
		}
		if len(b) > maxBinaryAnswer {
			return fmt.Errorf("streamapi: %s %s: %w: answer over %d bytes", op, path, ErrBadResponse, maxBinaryAnswer)
		}
		if resp.ContentLength >= 0 && int64(len(b)) != resp.ContentLength {
			return c.netErr(ctx, op, path, io.ErrUnexpectedEOF)
		}
		bin.header, bin.body = resp.Header, b
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		if errors.As(err, &se) || errors.As(err, &te) || errors.Is(err, io.EOF) {
			// Complete but wrong: empty, not JSON, or not the expected shape.
			return fmt.Errorf("streamapi: %s %s: %w: %w", op, path, ErrBadResponse, err)
		}
		// Cut short (io.ErrUnexpectedEOF) or broken mid-body: the connection, not the
		// server's JSON.
		return c.netErr(ctx, op, path, err)
	}
	return nil
}

// netErr wraps a transport error: the caller's context ending is returned as such (not
// retriable); everything else, the client's own timeout included, is ErrNetwork.
func (c *Client) netErr(ctx context.Context, op, path string, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("streamapi: %s %s: %w", op, path, cerr)
	}
	return fmt.Errorf("streamapi: %s %s: %w: %w", op, path, ErrNetwork, err)
}

// ListNodes lists the live log nodes of zone, or every live node when the zone has none
// (GET /v1/cluster/nodes?zone=).
func (c *Client) ListNodes(ctx context.Context, zone string) ([]Node, error) {
	q := url.Values{}
	if zone != "" {
		q.Set("zone", zone)
	}
	var res ListNodesResponse
	if err := c.do(ctx, "list nodes", http.MethodGet, "/v1/cluster/nodes", q, nil, &res, 0); err != nil {
		return nil, err
	}
	return res.Nodes, nil
}
