package metafake

import (
	"context"
	"fmt"
	"math"

	"github.com/loamhq/loam/shared/meta"
)

// Idempotent producers, with the sequencer's rules (meta/producer.go): ids from 1, named
// producers fenced by the next InitProducer of the name, epoch bumps by (id, epoch) with a
// repeat of the last bump answered the same, and per producer and partition the last
// meta.ProducerBatches chunks kept to answer duplicates. Unlike the sequencer, producers
// never expire and are never evicted.

type producers struct {
	next  int64
	byID  map[int64]*producerRec
	names map[string]int64 // ns 0x00 name -> id
	parts map[prodPartKey]*prodPart
}

type producerRec struct {
	ns, name   string
	epoch      int16
	bumpedFrom int32 // the epoch the last (id, epoch) bump came from; -1 after a bump by name
}

type prodPartKey struct {
	id int64
	pkey
}

// prodPart is what the sequencer keeps of one producer on one partition: the epoch and its
// last chunks (first and last sequence, base offset).
type prodPart struct {
	epoch       int16
	first, last []int32
	base        []int64
}

func (f *Meta) prods() *producers {
	if f.producers.byID == nil {
		f.producers = producers{byID: map[int64]*producerRec{}, names: map[string]int64{}, parts: map[prodPartKey]*prodPart{}}
	}
	return &f.producers
}

func (f *Meta) newProducer(ns, name string) meta.Producer {
	ps := f.prods()
	ps.next++
	ps.byID[ps.next] = &producerRec{ns: ns, name: name, bumpedFrom: -1}
	if name != "" {
		ps.names[ns+"\x00"+name] = ps.next
	}
	return meta.Producer{ID: ps.next}
}

// bump moves producer id to its next epoch, or to a new id at epoch 0 past math.MaxInt16.
func (f *Meta) bump(id int64, rec *producerRec) meta.Producer {
	if rec.epoch >= math.MaxInt16 {
		delete(f.prods().byID, id)
		return f.newProducer(rec.ns, rec.name)
	}
	if rec.bumpedFrom != int32(rec.epoch) {
		rec.bumpedFrom = -1
	}
	rec.epoch++
	return meta.Producer{ID: id, Epoch: rec.epoch}
}

// InitProducer allocates or bumps a producer as meta.Client.InitProducer says.
func (f *Meta) InitProducer(ctx context.Context, ns, name string, id int64, epoch int16) (meta.Producer, error) {
	if err := meta.CheckProducerRequest(ns, name, id, epoch); err != nil {
		return meta.Producer{}, err
	}
	if ns != meta.DefaultNS {
		return meta.Producer{}, fmt.Errorf("metafake: init producer in %s: %w", ns, meta.ErrNamespaceNotFound)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	ps := f.prods()
	if name != "" {
		pid, ok := ps.names[ns+"\x00"+name]
		rec := ps.byID[pid]
		if !ok || rec == nil {
			return f.newProducer(ns, name), nil
		}
		if id > 0 && id != pid {
			return meta.Producer{}, fmt.Errorf("metafake: init producer %s/%s: presented producer id %d, the name is held by %d: %w",
				ns, name, id, pid, meta.ErrProducerFenced)
		}
		return f.bump(pid, rec), nil
	}
	if id <= 0 {
		return f.newProducer(ns, ""), nil
	}
	rec := ps.byID[id]
	if rec == nil || rec.ns != ns {
		return f.newProducer(ns, ""), nil
	}
	switch cur := rec.epoch; {
	case epoch == cur:
		rec.bumpedFrom = int32(cur)
		return f.bump(id, rec), nil
	case rec.bumpedFrom >= 0 && int32(epoch) == rec.bumpedFrom && int32(cur) == rec.bumpedFrom+1:
		return meta.Producer{ID: id, Epoch: cur}, nil // a repeat of the last bump
	case epoch < cur:
		return meta.Producer{}, fmt.Errorf("metafake: init producer %d: epoch %d, current %d: %w", id, epoch, cur, meta.ErrProducerFenced)
	default:
		return meta.Producer{}, fmt.Errorf("metafake: init producer %d: epoch %d was never issued (current %d): %w", id, epoch, cur, meta.ErrUnknownProducer)
	}
}

// checkProducerChunk answers how the sequencer would take a producer's chunk: committed
// (to be recorded with recordProducerChunk), a duplicate with its original base offset, or
// a refusal (base offset -1).
func (f *Meta) checkProducerChunk(ch meta.Chunk) (meta.ChunkStatus, int64) {
	ps := f.prods()
	p := ch.Producer
	rec := ps.byID[p.ID]
	ns := ""
	for _, st := range f.streams {
		if st.ID == ch.StreamID {
			ns = st.Namespace
		}
	}
	switch {
	case rec == nil || rec.ns != ns:
		return meta.ChunkUnknownProducer, -1
	case p.Epoch < rec.epoch:
		return meta.ChunkProducerFenced, -1
	case p.Epoch > rec.epoch || p.BaseSequence < 0:
		return meta.ChunkUnknownProducer, -1
	}
	first, last := p.BaseSequence, meta.LastSequence(p.BaseSequence, ch.Records)
	pp := ps.parts[prodPartKey{p.ID, pkey{ch.StreamID, ch.Partition}}]
	if pp == nil || pp.epoch != p.Epoch {
		if first != 0 {
			return meta.ChunkOutOfOrderSequence, -1
		}
		return meta.ChunkCommitted, 0
	}
	for j := range pp.first {
		if pp.first[j] == first && pp.last[j] == last {
			return meta.ChunkDuplicate, pp.base[j]
		}
	}
	if n := len(pp.last); (n > 0 && !meta.NextSequence(pp.last[n-1], first)) || (n == 0 && first != 0) {
		return meta.ChunkOutOfOrderSequence, -1
	}
	return meta.ChunkCommitted, 0
}

// recordProducerChunk remembers a committed producer chunk, keeping the last
// meta.ProducerBatches per producer and partition.
func (f *Meta) recordProducerChunk(ch meta.Chunk, base int64) {
	ps := f.prods()
	p := ch.Producer
	k := prodPartKey{p.ID, pkey{ch.StreamID, ch.Partition}}
	pp := ps.parts[k]
	if pp == nil || pp.epoch != p.Epoch {
		pp = &prodPart{epoch: p.Epoch}
		ps.parts[k] = pp
	}
	pp.first = append(pp.first, p.BaseSequence)
	pp.last = append(pp.last, meta.LastSequence(p.BaseSequence, ch.Records))
	pp.base = append(pp.base, base)
	if d := len(pp.first) - meta.ProducerBatches; d > 0 {
		pp.first, pp.last, pp.base = pp.first[d:], pp.last[d:], pp.base[d:]
	}
}
