package node

import (
	"fmt"

	"github.com/loamhq/loam/lognode-svc/writer"
	"github.com/loamhq/loam/shared/objstore"
)

// ExpressNotifier hears of each express WAL object its node committed (docs/express.md):
// S3 Express directory buckets send no event notifications, so the node that committed an
// object is what tells the segmenter of it. Committed is called on the flush's path and
// must not block: an implementation queues (boundedly) and sends in the background.
type ExpressNotifier interface {
	Committed(key string)
}

// expressRead is the bucket the read path reads from (the cluster's bucket, and express WAL
// keys from the express bucket when the node serves the class) and the wrapper of the
// express writer's commit callback that tells cfg.ExpressOffload of each committed object.
func expressRead(cfg Config) (objstore.Bucket, func(func([]writer.Committed)) func([]writer.Committed), error) {
	none := func(f func([]writer.Committed)) func([]writer.Committed) { return f }
	if cfg.ExpressBucket == nil {
		if cfg.ExpressOffload != nil {
			return nil, nil, fmt.Errorf("node: ExpressOffload set without an ExpressBucket")
		}
		return cfg.Bucket, none, nil
	}
	r, err := objstore.NewRouted(cfg.Bucket, cfg.ExpressBucket)
	if err != nil {
		return nil, nil, fmt.Errorf("node: %w", err)
	}
	if cfg.ExpressOffload == nil {
		return r, none, nil
	}
	return r, func(f func([]writer.Committed)) func([]writer.Committed) {
		return func(cs []writer.Committed) {
			f(cs)
			last := ""
			for _, c := range cs { // the chunks of one flush: one object
				if c.Entry.Object != last {
					last = c.Entry.Object
					cfg.ExpressOffload.Committed(last)
				}
			}
		}
	}, nil
}

// ServesExpress reports whether the node serves streams of class express.
func (n *Node) ServesExpress() bool { return n.cfg.ExpressBucket != nil }
