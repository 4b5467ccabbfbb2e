package coord

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"
)

// The coordination store over HTTP: Handler serves a Store (a Bolt file, which only one
// process may open) so that several processes of one machine share it, as `loam dev
// --sequencers N --nodes M` does for its log nodes' registry and its functions; NewHTTP is
// the client, a Store like the others (it passes the same conformance suite). Each call is
// one POST of JSON to /v1/coord/<op>; errors keep their sentinel (ErrNotFound,
// ErrConditionFailed, ErrInvalid, ErrCorrupt, ErrClosed). A Query's items come back in one
// answer, so it holds one partition's matching items in memory. Meant for loopback: no
// authentication.

type httpItem struct {
	PK        string            `json:"pk"`
	SK        string            `json:"sk"`
	Version   int64             `json:"version,omitempty"`
	ExpiresAt int64             `json:"expires_at,omitempty"` // unix nanoseconds
	Attrs     map[string]string `json:"attrs,omitempty"`
	Counters  map[string]int64  `json:"counters,omitempty"`
}

func toHTTP(it Item) httpItem {
	h := httpItem{PK: it.PK, SK: it.SK, Version: it.Version, Attrs: it.Attrs, Counters: it.Counters}
	if !it.ExpiresAt.IsZero() {
		h.ExpiresAt = it.ExpiresAt.UnixNano()
	}
	return h
}

func (h httpItem) item() Item {
	it := Item{PK: h.PK, SK: h.SK, Version: h.Version, Attrs: h.Attrs, Counters: h.Counters}
	if h.ExpiresAt != 0 {
		it.ExpiresAt = time.Unix(0, h.ExpiresAt)
	}
	return it
}

type httpRequest struct {
	Item   *httpItem        `json:"item,omitempty"`
	Cond   Condition        `json:"cond"`
	PK     string           `json:"pk,omitempty"`
	SK     string           `json:"sk,omitempty"`
	Prefix string           `json:"prefix,omitempty"`
	Name   string           `json:"name,omitempty"`
	Delta  int64            `json:"delta,omitempty"`
	Deltas map[string]int64 `json:"deltas,omitempty"`
}

type httpResponse struct {
	Item   *httpItem        `json:"item,omitempty"`
	Items  []httpItem       `json:"items,omitempty"`
	Value  int64            `json:"value,omitempty"`
	Values map[string]int64 `json:"values,omitempty"`
	Error  *httpError       `json:"error,omitempty"`
}

type httpError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

var httpCodes = map[string]error{"not_found": ErrNotFound, "condition_failed": ErrConditionFailed,
	"invalid": ErrInvalid, "corrupt": ErrCorrupt, "closed": ErrClosed}

// Handler serves s under /v1/coord/.
func Handler(s Store) http.Handler {
	mux := http.NewServeMux()
	serve := func(op string, fn func(ctx context.Context, r httpRequest) (httpResponse, error)) {
		mux.HandleFunc("POST /v1/coord/"+op, func(w http.ResponseWriter, req *http.Request) {
			var r httpRequest
			dec := json.NewDecoder(http.MaxBytesReader(w, req.Body, 4<<20))
			dec.DisallowUnknownFields()
			var res httpResponse
			var err error
			if derr := dec.Decode(&r); derr != nil {
				err = fmt.Errorf("%w: request body: %v", ErrInvalid, derr)
			} else {
				res, err = fn(req.Context(), r)
			}
			w.Header().Set("Content-Type", "application/json")
			if err != nil {
				res = httpResponse{Error: &httpError{Code: "internal", Message: err.Error()}}
				for code, sentinel := range httpCodes {
					if errors.Is(err, sentinel) {
						res.Error.Code = code
					}
				}
				status := http.StatusInternalServerError
				if res.Error.Code != "internal" {
					status = http.StatusConflict
				}
				w.WriteHeader(status)
			}
			json.NewEncoder(w).Encode(res)
		})
	}
	serve("put", func(ctx context.Context, r httpRequest) (httpResponse, error) {
		if r.Item == nil {
			return httpResponse{}, fmt.Errorf("%w: put without an item", ErrInvalid)
		}
		it, err := s.Put(ctx, r.Item.item(), r.Cond)
		h := toHTTP(it)
		return httpResponse{Item: &h}, err
	})
	serve("get", func(ctx context.Context, r httpRequest) (httpResponse, error) {
		it, err := s.Get(ctx, r.PK, r.SK)
		h := toHTTP(it)
		return httpResponse{Item: &h}, err
	})
	serve("query", func(ctx context.Context, r httpRequest) (httpResponse, error) {
		res := httpResponse{Items: []httpItem{}}
		err := s.Query(ctx, r.PK, r.Prefix, func(it Item) error {
			res.Items = append(res.Items, toHTTP(it))
			return nil
		})
		return res, err
	})
	serve("delete", func(ctx context.Context, r httpRequest) (httpResponse, error) {
		return httpResponse{}, s.Delete(ctx, r.PK, r.SK, r.Cond)
	})
	serve("add", func(ctx context.Context, r httpRequest) (httpResponse, error) {
		v, err := s.Add(ctx, r.PK, r.SK, r.Name, r.Delta)
		return httpResponse{Value: v}, err
	})
	serve("addall", func(ctx context.Context, r httpRequest) (httpResponse, error) {
		v, err := s.AddAll(ctx, r.PK, r.SK, r.Deltas)
		return httpResponse{Values: v}, err
	})
	return mux
}

// HTTP is a Store served by Handler at a base URL.
type HTTP struct {
	base   string
	client *http.Client
	now    func() time.Time
	closed atomic.Bool
}

// NewHTTP returns the client of the store Handler serves at baseURL (http://host:port).
// Now is this process's clock unless WithClock says otherwise: the processes of one
// machine share it.
func NewHTTP(baseURL string, opts ...Option) *HTTP {
	o := options{now: time.Now}
	for _, f := range opts {
		f(&o)
	}
	return &HTTP{base: strings.TrimSuffix(baseURL, "/"), client: &http.Client{Timeout: 30 * time.Second}, now: o.now}
}

func (h *HTTP) call(ctx context.Context, op string, req httpRequest) (httpResponse, error) {
	var res httpResponse
	if h.closed.Load() {
		return res, fmt.Errorf("coord: %s: %w", op, ErrClosed)
	}
	body, err := json.Marshal(req)
	if err != nil {
		return res, err
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, h.base+"/v1/coord/"+op, bytes.NewReader(body))
	if err != nil {
		return res, err
	}
	hr.Header.Set("Content-Type", "application/json")
	resp, err := h.client.Do(hr)
	if err != nil {
		return res, fmt.Errorf("coord: %s via %s: %w", op, h.base, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return res, fmt.Errorf("coord: %s via %s: %w", op, h.base, err)
	}
	if err := json.Unmarshal(b, &res); err != nil {
		return res, fmt.Errorf("coord: %s via %s: answer (HTTP %d): %w", op, h.base, resp.StatusCode, err)
	}
	if res.Error != nil {
		if sentinel, ok := httpCodes[res.Error.Code]; ok {
			return res, fmt.Errorf("coord: %s: %s: %w", op, strings.TrimPrefix(res.Error.Message, "coord: "), sentinel)
		}
		return res, fmt.Errorf("coord: %s via %s: %s", op, h.base, res.Error.Message)
	}
	return res, nil
}

// Every argument is checked here, before it is sent: JSON would turn invalid UTF-8 into
// valid replacement characters.

func (h *HTTP) Put(ctx context.Context, item Item, cond Condition) (Item, error) {
	if err := checkItem(item); err != nil {
		return Item{}, err
	}
	if err := checkCond(cond, false); err != nil {
		return Item{}, err
	}
	hi := toHTTP(item)
	res, err := h.call(ctx, "put", httpRequest{Item: &hi, Cond: cond})
	if err != nil {
		return Item{}, err
	}
	return res.Item.item(), nil
}

func (h *HTTP) Get(ctx context.Context, pk, sk string) (Item, error) {
	if err := checkKey(pk, sk); err != nil {
		return Item{}, err
	}
	res, err := h.call(ctx, "get", httpRequest{PK: pk, SK: sk})
	if err != nil {
		return Item{}, err
	}
	return res.Item.item(), nil
}

func (h *HTTP) Query(ctx context.Context, pk, skPrefix string, fn func(Item) error) error {
	if err := checkPK(pk); err != nil {
		return err
	}
	if !utf8.ValidString(skPrefix) {
		return fmt.Errorf("coord: query prefix %q is not UTF-8: %w", clip(skPrefix), ErrInvalid)
	}
	res, err := h.call(ctx, "query", httpRequest{PK: pk, Prefix: skPrefix})
	if err != nil {
		return err
	}
	for _, it := range res.Items {
		if err := fn(it.item()); err != nil {
			return err
		}
	}
	return nil
}

func (h *HTTP) Delete(ctx context.Context, pk, sk string, cond Condition) error {
	if err := checkKey(pk, sk); err != nil {
		return err
	}
	if err := checkCond(cond, true); err != nil {
		return err
	}
	_, err := h.call(ctx, "delete", httpRequest{PK: pk, SK: sk, Cond: cond})
	return err
}

func (h *HTTP) Add(ctx context.Context, pk, sk, name string, delta int64) (int64, error) {
	if err := checkKey(pk, sk); err != nil {
		return 0, err
	}
	if err := checkName(name); err != nil {
		return 0, err
	}
	res, err := h.call(ctx, "add", httpRequest{PK: pk, SK: sk, Name: name, Delta: delta})
	return res.Value, err
}

func (h *HTTP) AddAll(ctx context.Context, pk, sk string, deltas map[string]int64) (map[string]int64, error) {
	if err := checkAddAll(pk, sk, deltas); err != nil {
		return nil, err
	}
	res, err := h.call(ctx, "addall", httpRequest{PK: pk, SK: sk, Deltas: deltas})
	if err != nil {
		return nil, err
	}
	return res.Values, nil
}

func (h *HTTP) Now() time.Time { return h.now() }

// Close makes later calls fail with ErrClosed; the served store stays open.
func (h *HTTP) Close() error {
	h.closed.Store(true)
	return nil
}
