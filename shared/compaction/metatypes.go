package compaction

import (
	"errors"

	"github.com/loamhq/loam/shared/meta"
)

// Stand-ins for the sequencer additions of issue 4 (/work/issue4-design.md) until
// shared/meta declares them; they are replaced by meta's types when it does.

// Lease fences one partition's background work.
type Lease struct {
	StreamID  uint64
	Partition int32
	Kind      string
	Holder    string
	Epoch     uint64
	ExpiresMs int64
}

// IndexSwap replaces a contiguous run of index entries.
type IndexSwap struct {
	Lease   Lease
	Old     []meta.IndexEntry
	New     []meta.IndexEntry
	StampMs int64
}

var (
	ErrLeaseHeld    = errors.New("meta: lease held by another holder")
	ErrLeaseLost    = errors.New("meta: lease lost")
	ErrIndexChanged = errors.New("meta: index changed")
)
