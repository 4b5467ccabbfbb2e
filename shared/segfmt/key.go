package segfmt

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// MaxIDLen is the longest segment id ObjectKey accepts, in bytes.
const MaxIDLen = 128

// ObjectKey returns the bucket key of a segment object:
// "seg/<stream id>/<partition>/<base offset, 20 digits>-<id>.seg". The zero-padded base
// offset makes a listing of one partition's prefix come out in offset order; id (a ULID,
// say) keeps two segments of the same range apart, as when compaction rewrites one. id
// should pass ValidateID; ParseObjectKey rejects keys built from one that does not.
func ObjectKey(streamID uint64, partition int32, baseOffset int64, id string) string {
	return fmt.Sprintf("seg/%d/%d/%020d-%s.seg", streamID, partition, baseOffset, id)
}

// ObjectPrefix returns the key prefix under which ObjectKey puts one partition's segments.
func ObjectPrefix(streamID uint64, partition int32) string {
	return fmt.Sprintf("seg/%d/%d/", streamID, partition)
}

// ValidateID checks that id can name a segment in an object key: 1 to MaxIDLen bytes of
// UTF-8 without '/' or control characters.
func ValidateID(id string) error {
	if msg := idProblem(id); msg != "" {
		return fmt.Errorf("segfmt: segment id %q: %s: %w", id, msg, ErrInvalid)
	}
	return nil
}

func idProblem(id string) string {
	switch {
	case id == "":
		return "empty"
	case len(id) > MaxIDLen:
		return fmt.Sprintf("longer than %d bytes", MaxIDLen)
	case !utf8.ValidString(id):
		return "not UTF-8"
	}
	for _, r := range id {
		if r == '/' || r < 0x20 || r == 0x7f {
			return fmt.Sprintf("holds %q", r)
		}
	}
	return ""
}

// ParseObjectKey parses a key ObjectKey returns. It accepts only the canonical form:
// decimal numbers without leading zeros (or a plus sign), a non-negative partition, a
// 20-digit base offset and a valid id.
func ParseObjectKey(key string) (streamID uint64, partition int32, baseOffset int64, id string, err error) {
	fail := func(msg string) (uint64, int32, int64, string, error) {
		return 0, 0, 0, "", fmt.Errorf("segfmt: parse object key %q: %s: %w", key, msg, ErrInvalid)
	}
	rest, ok := strings.CutPrefix(key, "seg/")
	if !ok {
		return fail(`no "seg/" prefix`)
	}
	rest, ok = strings.CutSuffix(rest, ".seg")
	if !ok {
		return fail(`no ".seg" suffix`)
	}
	parts := strings.SplitN(rest, "/", 3)
	if len(parts) != 3 {
		return fail("want seg/<stream>/<partition>/<base offset>-<id>.seg")
	}
	if !canonicalDecimal(parts[0]) {
		return fail("bad stream id")
	}
	if streamID, err = strconv.ParseUint(parts[0], 10, 64); err != nil {
		return fail("bad stream id")
	}
	p, err := strconv.ParseInt(parts[1], 10, 32)
	if err != nil || !canonicalDecimal(parts[1]) {
		return fail("bad partition")
	}
	name := parts[2]
	if len(name) < 22 || name[20] != '-' {
		return fail("want a 20-digit base offset, '-' and an id")
	}
	digits := name[:20]
	for i := range len(digits) {
		if digits[i] < '0' || digits[i] > '9' {
			return fail("bad base offset")
		}
	}
	u, err := strconv.ParseUint(digits, 10, 64)
	if err != nil || u > math.MaxInt64 {
		return fail("base offset out of range")
	}
	id = name[21:]
	if msg := idProblem(id); msg != "" {
		return fail("id " + msg)
	}
	return streamID, int32(p), int64(u), id, nil
}

// canonicalDecimal reports whether s is digits only, without a leading zero unless it is "0".
func canonicalDecimal(s string) bool {
	if s == "" || (s[0] == '0' && len(s) > 1) {
		return false
	}
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
