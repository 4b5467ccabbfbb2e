package segmenter

import (
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/objstore"
)

// DefaultExpressAge is Config.ExpressAge's default: express WAL objects reach a segment
// about this long after they were written (plus the notification's or sweep's delay).
const DefaultExpressAge = 2 * time.Second

// expressDue reports whether key is an express WAL object, created at id's time, past
// ExpressAge.
func (s *Segmenter) expressDue(key string, id ulid.ULID) bool {
	return objstore.IsExpressKey(key) && s.cfg.Now().Sub(ulid.Time(id.Time())) >= s.cfg.ExpressAge
}

// expressRunDue reports whether run holds an express WAL entry past ExpressAge: the whole
// run is then segmented, so no express object waits for standard ones to fill a segment.
func (s *Segmenter) expressRunDue(run []meta.IndexEntry) bool {
	for _, e := range run {
		if objstore.IsExpressKey(e.Object) && s.cfg.Now().Sub(entryTime(e)) >= s.cfg.ExpressAge {
			return true
		}
	}
	return false
}
