package gc

import (
	"time"

	"github.com/loamhq/loam/shared/objstore"
)

// DefaultExpressGrace is Config.ExpressGrace's default: long enough for a fetch that
// resolved an express WAL entry before its swap to finish its range GETs.
const DefaultExpressGrace = time.Minute

// grace is how long a retired object waits before it is deleted.
func (g *GC) grace(key string) time.Duration {
	if !objstore.IsExpressKey(key) {
		return g.cfg.Grace
	}
	eg := g.cfg.ExpressGrace
	if eg <= 0 {
		eg = DefaultExpressGrace
	}
	return min(eg, g.cfg.Grace)
}
