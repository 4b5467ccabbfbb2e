package meta

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Idempotent producers.
//
// The sequencer allocates producer ids and epochs (InitProducer) and checks, when it
// applies a CommitWal, each chunk that carries a producer: chunk i of producer P on a
// partition holds the batches with sequences [BaseSequence, BaseSequence+Records-1]
// (wrapping after math.MaxInt32 to 0, as Kafka's sequences do). Per producer and
// partition the sequencer keeps the last ProducerBatches chunks it committed:
//   - a chunk whose sequence range is one of them (same epoch), or lies within one of
//     them, is a duplicate: it is answered ChunkDuplicate with the ORIGINAL base offset
//     (of its first sequence: a log node commits a producer's consecutive requests to a
//     partition as one chunk under load, and the producer may retry them one by one),
//     and nothing new is written;
//   - a chunk whose base sequence does not follow the last committed one is refused
//     ChunkOutOfOrderSequence (a producer's first chunk on a partition, and its first
//     after an epoch bump, starts at sequence 0);
//   - a chunk of an epoch older than the producer's current one is refused
//     ChunkProducerFenced;
//   - a chunk of a producer the sequencer does not know (never allocated, expired, evicted,
//     of another namespace, or an epoch never issued) is refused ChunkUnknownProducer.
//
// The shapes are Kafka's (InitProducerId, Produce): producer id int64, epoch int16,
// sequence int32 per partition. Ids start at 1 and are never reused; an id of 0 or below
// (Kafka's -1) means "no producer".
//
// Producer state lives in the Raft state machine: it survives failover, snapshots and
// restarts. A producer that commits nothing and is not re-initialized for
// ProducerIdleExpiry is forgotten (on the sequencer clock). Each namespace holds at most a
// configured number of producers (DefaultMaxProducers): initializing a new one beyond it
// evicts the namespace's least recently used producer, whose next produce is then refused
// ChunkUnknownProducer.

// Producer limits.
const (
	// ProducerBatches is how many committed chunks per producer and partition the
	// sequencer remembers for duplicate detection (Kafka's 5 in-flight batches).
	ProducerBatches = 5
	// ProducerIdleExpiry: a producer idle this long is forgotten.
	ProducerIdleExpiry = 24 * time.Hour
	// DefaultMaxProducers is the per-namespace cap on producers (the sequencer's
	// configuration may change it).
	DefaultMaxProducers = 10000
	// NoProducer is the producer id of a chunk without a producer (any id <= 0 is).
	NoProducer = -1
)

// Producer errors.
var (
	// ErrProducerFenced: the producer's epoch is older than the current one (another
	// InitProducer bumped it). The holder must stop; nothing was written.
	ErrProducerFenced = errors.New("meta: producer fenced")
	// ErrOutOfOrderSequence: the chunk's base sequence does not follow the last one
	// committed for its producer and partition, and it is no duplicate of the last
	// ProducerBatches. Nothing was written: retry once the earlier batches committed.
	ErrOutOfOrderSequence = errors.New("meta: out of order sequence")
	// ErrUnknownProducer: the producer id (or epoch) was never allocated, or the producer
	// expired or was evicted. Nothing was written; InitProducer again.
	ErrUnknownProducer = errors.New("meta: unknown producer")
)

// Producer is an idempotent producer's identity: its id and current epoch.
type Producer struct {
	ID    int64 `json:"producer_id"`
	Epoch int16 `json:"epoch"`
}

// ChunkProducer is the producer of one chunk: its id (<= 0: none), epoch, and the base
// sequence of the chunk's first record. The chunk's records take sequences BaseSequence
// .. LastSequence.
type ChunkProducer struct {
	ID           int64
	Epoch        int16
	BaseSequence int32
}

// Has reports whether the chunk carries a producer.
func (p ChunkProducer) Has() bool { return p.ID > 0 }

// LastSequence is the sequence of the last of n records starting at base, wrapping after
// math.MaxInt32 to 0 as Kafka's DefaultRecordBatch.incrementSequence does.
func LastSequence(base int32, n int64) int32 {
	return IncrementSequence(base, n-1)
}

// IncrementSequence adds inc (>= 0) to a sequence, wrapping after math.MaxInt32 to 0.
func IncrementSequence(seq int32, inc int64) int32 {
	inc %= int64(math.MaxInt32) + 1
	if int64(seq) > math.MaxInt32-inc {
		return int32(inc - (math.MaxInt32 - int64(seq)) - 1)
	}
	return seq + int32(inc)
}

// SequencesWithin reports whether the sequence range [first, last] lies within the range
// [from, to] (each wrapping after math.MaxInt32 to 0), and how many sequences after from it
// starts.
func SequencesWithin(from, to, first, last int32) (int64, bool) {
	dist := func(a, b int32) int64 { // sequences from a up to b
		d := int64(b) - int64(a)
		if d < 0 {
			d += int64(math.MaxInt32) + 1
		}
		return d
	}
	span, start, end := dist(from, to), dist(from, first), dist(from, last)
	return start, start <= end && end <= span
}

// NextSequence reports whether next directly follows last (last+1, or 0 after MaxInt32).
func NextSequence(last, next int32) bool {
	if last == math.MaxInt32 {
		return next == 0
	}
	return next == last+1
}

// CheckProducerRequest validates InitProducer's arguments: a name of at most MaxNameLength
// bytes, and an id with an epoch in 0..MaxInt16 or no id (id <= 0, epoch any).
func CheckProducerRequest(ns, name string, id int64, epoch int16) error {
	switch {
	case ns == "":
		return fmt.Errorf("%w: init producer: empty namespace", ErrInvalidArgument)
	case len(name) > MaxNameLength:
		return fmt.Errorf("%w: init producer: name of %d bytes, more than %d", ErrInvalidArgument, len(name), MaxNameLength)
	case id > 0 && epoch < 0:
		return fmt.Errorf("%w: init producer: producer id %d with epoch %d: want an epoch of 0..%d", ErrInvalidArgument, id, epoch, math.MaxInt16)
	}
	return nil
}
