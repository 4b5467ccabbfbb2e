package peerfill

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
)

// ContentType is the media type of a fill frame.
const ContentType = "application/vnd.loam.tail-fill"

// Handler serves POST Path: it decodes a frame and hands each chunk, with bytes of its own, to Fill. The listener it
// is served on carries the cluster identity (mutual TLS), so only cluster members reach it.
type Handler struct {
	Fill     func(Chunk)
	received prometheus.Counter
	refused  prometheus.Counter
}

// NewHandler returns a Handler filling with fill; its counters go to r (nil: none).
func NewHandler(fill func(Chunk), r prometheus.Registerer) (*Handler, error) {
	h := &Handler{Fill: fill,
		received: prometheus.NewCounter(prometheus.CounterOpts{Name: "loam_peer_fill_chunks_received_total",
			Help: "Committed chunks a zone peer sent into this node's tail cache."}),
		refused: prometheus.NewCounter(prometheus.CounterOpts{Name: "loam_peer_fill_requests_refused_total",
			Help: "Fill requests refused (bad frame, too large, wrong method)."}),
	}
	if r != nil {
		for _, c := range []prometheus.Collector{h.received, h.refused} {
			if err := r.Register(c); err != nil {
				return nil, fmt.Errorf("peerfill: metrics: %w", err)
			}
		}
	}
	return h, nil
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != Path {
		h.fail(w, http.StatusNotFound, "not_found", fmt.Sprintf("no route %s (the peer listener serves POST %s only)", r.URL.Path, Path))
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		h.fail(w, http.StatusMethodNotAllowed, "method_not_allowed", fmt.Sprintf("%s %s: use POST", r.Method, Path))
		return
	}
	if ct := r.Header.Get("Content-Type"); ct != ContentType {
		h.fail(w, http.StatusUnsupportedMediaType, "unsupported_media_type", fmt.Sprintf("content type %q: want %s", ct, ContentType))
		return
	}
	if r.ContentLength > MaxFrameBytes {
		h.fail(w, http.StatusRequestEntityTooLarge, "request_too_large", fmt.Sprintf("frame of %d bytes: at most %d", r.ContentLength, MaxFrameBytes))
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxFrameBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			h.fail(w, http.StatusRequestEntityTooLarge, "request_too_large", fmt.Sprintf("frame over %d bytes", MaxFrameBytes))
			return
		}
		h.fail(w, http.StatusBadRequest, "bad_request", "reading the frame: "+err.Error())
		return
	}
	chunks, err := Decode(body)
	if err != nil {
		h.fail(w, http.StatusBadRequest, "bad_frame", err.Error())
		return
	}
	for _, c := range chunks {
		// Each chunk gets bytes of its own: the tail cache bounds what it holds by their
		// length, which must not keep the whole frame alive.
		c.Batches = [][]byte{append([]byte(nil), c.Batches[0]...)}
		h.Fill(c)
	}
	h.received.Add(float64(len(chunks)))
	w.WriteHeader(http.StatusNoContent)
}

func (h *Handler) fail(w http.ResponseWriter, status int, code, msg string) {
	h.refused.Inc()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": code, "message": msg}})
}
