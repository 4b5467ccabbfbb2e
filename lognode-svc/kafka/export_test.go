package kafka

import (
	"context"

	"github.com/loamhq/loam/shared/meta"
)

// HandleFrame serves one request frame body (the bytes after the length prefix) on a new
// authenticated connection of namespace default, as the connection loop does, and
// answers the response frame and the error that would close the connection.
func (s *Server) HandleFrame(ctx context.Context, body []byte) ([]byte, error) {
	c := &conn{s: s, ns: meta.DefaultNS, authed: true}
	out, wait, err := c.handle(ctx, body, nil)
	if wait != nil {
		out = wait()
	}
	return out, err
}
