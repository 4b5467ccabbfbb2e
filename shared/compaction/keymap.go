package compaction

import (
	"bytes"
	"hash/maphash"
)

// keyMap maps record keys to the latest offset seen for them, within a fixed byte budget:
// an open-addressed table of fixed-size slots plus the key bytes, copied into chunks.
// Keys are compared whole, so two keys never share a slot by hash alone. It holds no
// pointers the garbage collector has to scan besides its chunk list.
type keyMap struct {
	limit  int64 // bytes: table (old and new arrays while it grows) plus key chunks
	seed   maphash.Seed
	slots  []kmSlot // len is a power of two; hash 0 marks a free slot
	n      int
	chunks [][]byte
	chunkB int64 // bytes of chunks allocated
	chunk  int64 // size of a key chunk: limit/8, between 256 B and 64 KiB
}

type kmSlot struct {
	hash  uint64 // never 0 for a used slot
	off   int64
	chunk uint32
	pos   uint32
	klen  uint32
}

const (
	kmSlotBytes = 32
	kmMaxChunk  = 64 << 10
	kmMinChunk  = 256
	kmMinSlots  = 64
	kmLoadNum   = 3 // grow past 3/4 full
	kmLoadDen   = 4
)

func newKeyMap(limit int64) *keyMap {
	return &keyMap{limit: limit, seed: maphash.MakeSeed(), chunk: min(max(limit/8, kmMinChunk), kmMaxChunk)}
}

// bytes is what the map holds now.
func (m *keyMap) bytes() int64 { return int64(len(m.slots))*kmSlotBytes + m.chunkB }

// fits reports whether one key of klen bytes could ever be put into an empty map.
func (m *keyMap) fits(klen int) bool {
	return kmMinSlots*kmSlotBytes+max(int64(klen), m.chunk) <= m.limit
}

func (m *keyMap) hash(key []byte) uint64 { return maphash.Bytes(m.seed, key) | 1 }

func (m *keyMap) key(s *kmSlot) []byte {
	return m.chunks[s.chunk][s.pos : s.pos+s.klen]
}

// find returns the slot of key, or the free slot where it would go.
func (m *keyMap) find(h uint64, key []byte) *kmSlot {
	mask := uint64(len(m.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		s := &m.slots[i]
		if s.hash == 0 || (s.hash == h && bytes.Equal(m.key(s), key)) {
			return s
		}
	}
}

// get returns the offset recorded for key.
func (m *keyMap) get(key []byte) (int64, bool) {
	if m.n == 0 {
		return 0, false
	}
	s := m.find(m.hash(key), key)
	return s.off, s.hash != 0
}

// put records off for key and reports true, or reports false, changing nothing, when a
// new key does not fit in the budget. A key already present always takes the new offset.
func (m *keyMap) put(key []byte, off int64) bool {
	h := m.hash(key)
	if m.slots != nil {
		if s := m.find(h, key); s.hash != 0 {
			s.off = off
			return true
		}
	}
	// A new key: room for its bytes, then for its slot.
	extra := int64(0)
	last := len(m.chunks) - 1
	needChunk := last < 0 || len(m.chunks[last])+len(key) > cap(m.chunks[last])
	if needChunk {
		extra = max(int64(len(key)), m.chunk)
	}
	grow := len(m.slots) == 0 || (m.n+1)*kmLoadDen > len(m.slots)*kmLoadNum
	table := int64(len(m.slots)) * kmSlotBytes
	if grow {
		// While growing, the old and the new table are both alive.
		table += max(int64(len(m.slots))*2, kmMinSlots) * kmSlotBytes
	}
	if table+m.chunkB+extra > m.limit {
		return false
	}
	if needChunk {
		m.chunks = append(m.chunks, make([]byte, 0, extra))
		m.chunkB += extra
		last++
	}
	if grow {
		m.resize(max(len(m.slots)*2, kmMinSlots))
	}
	c := m.chunks[last]
	pos := len(c)
	m.chunks[last] = append(c, key...)
	s := m.find(h, key)
	*s = kmSlot{hash: h, off: off, chunk: uint32(last), pos: uint32(pos), klen: uint32(len(key))}
	m.n++
	return true
}

func (m *keyMap) resize(n int) {
	old := m.slots
	m.slots = make([]kmSlot, n)
	mask := uint64(n - 1)
	for _, s := range old {
		if s.hash == 0 {
			continue
		}
		i := s.hash & mask
		for m.slots[i].hash != 0 {
			i = (i + 1) & mask
		}
		m.slots[i] = s
	}
}
