package httpapi

import (
	"context"

	"github.com/loamhq/loam/shared/meta"
)

// Stream describes stream name of namespace ns from the node's stream catalog (a cache
// that StreamsChanged and the server's own admin routes invalidate), so the node's other
// APIs (grpcapi) share it.
func (s *Server) Stream(ctx context.Context, ns, name string) (meta.Stream, error) {
	return s.streams.get(ctx, ns, name)
}
