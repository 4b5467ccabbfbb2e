package objstore

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// CheckKey reports whether key is a valid object key: a non-empty UTF-8 string of
// '/'-separated parts without empty, "." or ".." parts. The error wraps ErrInvalidKey.
func CheckKey(key string) error { return checkKey("check key", key) }

// checkKey is CheckKey with the operation named in the error.
func checkKey(op, key string) error {
	if why := keyProblem(key); why != "" {
		return fmt.Errorf("objstore: %s %q: %s: %w", op, key, why, ErrInvalidKey)
	}
	return nil
}

func keyProblem(key string) string {
	if key == "" {
		return "empty"
	}
	if !utf8.ValidString(key) {
		return "not UTF-8"
	}
	rest := key
	for {
		part, tail, more := strings.Cut(rest, "/")
		switch part {
		case "":
			return "empty part"
		case ".", "..":
			return fmt.Sprintf("%q part", part)
		}
		if !more {
			return ""
		}
		rest = tail
	}
}

// rangeBounds applies the GetRange rule to an object of size bytes: it returns the half-open
// byte range [lo, hi) to read. off < 0 or off > size fails with ErrInvalidRange; off == size
// is an empty read; n < 0 reads to the end; a range past the end is cut at the end.
func rangeBounds(key string, size, off, n int64) (lo, hi int64, err error) {
	if off < 0 || off > size {
		return 0, 0, fmt.Errorf("objstore: get range %s: offset %d, size %d: %w", key, off, size, ErrInvalidRange)
	}
	if n < 0 || n > size-off {
		return off, size, nil
	}
	return off, off + n, nil
}
