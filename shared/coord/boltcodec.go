package coord

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"maps"
	"slices"
	"unicode/utf8"
)

// Bolt item value, format version 1 (the key is the sort key inside the partition key's
// bucket; neither is repeated in the value):
//
//	offset  size  field
//	0       4     magic "LCIT"
//	4       1     format version (1)
//	5       8     Version, int64 big-endian, non-zero
//	13      8     expiry, epoch seconds, int64 big-endian; 0: never
//	21      …     attribute count (uvarint), then per attribute in strictly increasing
//	              name order: name length (uvarint), name, value length (uvarint), value
//	…       …     counter count (uvarint), then per counter in strictly increasing name
//	              order: name length (uvarint), name, value (zig-zag varint)
//	end-4   4     CRC32C (Castagnoli) of every byte before it, big-endian
//
// Names are 1–255 bytes of UTF-8, attribute values UTF-8. A decoder rejects anything else
// (ErrCorrupt): bad magic, unknown version, wrong CRC, zero version, negative expiry,
// counts larger than the bytes left could hold, names out of order, trailing bytes.
const (
	itemMagic     = "LCIT"
	itemVersion1  = 1
	itemHeaderLen = 4 + 1 + 8 + 8
	itemMinLen    = itemHeaderLen + 1 + 1 + 4
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// appendItem appends the v1 encoding of it (its Version, expiry exp in epoch seconds,
// attributes and counters) to dst.
func appendItem(dst []byte, it Item, exp int64) []byte {
	start := len(dst)
	dst = append(dst, itemMagic...)
	dst = append(dst, itemVersion1)
	dst = binary.BigEndian.AppendUint64(dst, uint64(it.Version))
	dst = binary.BigEndian.AppendUint64(dst, uint64(exp))
	names := slices.Sorted(maps.Keys(it.Attrs))
	dst = binary.AppendUvarint(dst, uint64(len(names)))
	for _, k := range names {
		dst = appendString(dst, k)
		dst = appendString(dst, it.Attrs[k])
	}
	names = slices.Sorted(maps.Keys(it.Counters))
	dst = binary.AppendUvarint(dst, uint64(len(names)))
	for _, k := range names {
		dst = appendString(dst, k)
		dst = binary.AppendVarint(dst, it.Counters[k])
	}
	return binary.BigEndian.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli))
}

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// decodeItem decodes a v1 item value; PK and SK are left empty. It returns the item and
// its expiry in epoch seconds (0: never). Malformed input fails with ErrCorrupt.
func decodeItem(b []byte) (Item, int64, error) {
	if len(b) < itemMinLen {
		return Item{}, 0, fmt.Errorf("coord: item value of %d bytes, want at least %d: %w", len(b), itemMinLen, ErrCorrupt)
	}
	if string(b[:4]) != itemMagic {
		return Item{}, 0, fmt.Errorf("coord: item value: bad magic %q: %w", b[:4], ErrCorrupt)
	}
	if b[4] != itemVersion1 {
		return Item{}, 0, fmt.Errorf("coord: item value: unknown format version %d: %w", b[4], ErrCorrupt)
	}
	body, sum := b[:len(b)-4], binary.BigEndian.Uint32(b[len(b)-4:])
	if got := crc32.Checksum(body, castagnoli); got != sum {
		return Item{}, 0, fmt.Errorf("coord: item value: crc32c %08x, stored %08x: %w", got, sum, ErrCorrupt)
	}
	it := Item{Version: int64(binary.BigEndian.Uint64(body[5:]))}
	exp := int64(binary.BigEndian.Uint64(body[13:]))
	if it.Version == 0 {
		return Item{}, 0, fmt.Errorf("coord: item value: zero version: %w", ErrCorrupt)
	}
	if exp < 0 {
		return Item{}, 0, fmt.Errorf("coord: item value: negative expiry %d: %w", exp, ErrCorrupt)
	}
	d := decoder{b: body[itemHeaderLen:]}
	if n := d.count(); n > 0 {
		it.Attrs = make(map[string]string, n)
		prev := ""
		for range n {
			k, v := d.name(), d.str()
			if d.err != nil {
				break
			}
			if !utf8.ValidString(v) {
				d.fail("attribute %q value is not UTF-8", k)
				break
			}
			if k <= prev {
				d.fail("attribute %q out of order", k)
				break
			}
			it.Attrs[k], prev = v, k
		}
	}
	if n := d.count(); n > 0 {
		it.Counters = make(map[string]int64, n)
		prev := ""
		for range n {
			k, v := d.name(), d.varint()
			if d.err != nil {
				break
			}
			if k <= prev {
				d.fail("counter %q out of order", k)
				break
			}
			it.Counters[k], prev = v, k
		}
	}
	if d.err == nil && len(d.b) > 0 {
		d.fail("%d trailing bytes", len(d.b))
	}
	if d.err != nil {
		return Item{}, 0, d.err
	}
	return it, exp, nil
}

// decoder reads the variable part of an item value with a sticky error: after the first
// failure every read returns a zero value.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("coord: item value: "+format+": %w", append(args, ErrCorrupt)...)
	}
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("bad uvarint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail("bad varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

// count reads an entry count; every entry takes at least two bytes, so a count above half
// the remaining bytes is corrupt (and never allocates).
func (d *decoder) count() int {
	n := d.uvarint()
	if d.err == nil && n > uint64(len(d.b)/2) {
		d.fail("count %d exceeds the %d bytes left", n, len(d.b))
		return 0
	}
	return int(n)
}

func (d *decoder) str() string {
	n := d.uvarint()
	if d.err != nil {
		return ""
	}
	if n > uint64(len(d.b)) {
		d.fail("string of %d bytes, %d left", n, len(d.b))
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

func (d *decoder) name() string {
	s := d.str()
	if d.err == nil && (s == "" || len(s) > MaxNameLen || !utf8.ValidString(s)) {
		d.fail("bad name %q", clip(s))
		return ""
	}
	return s
}
