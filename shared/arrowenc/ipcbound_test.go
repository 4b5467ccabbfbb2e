package arrowenc

import (
	"encoding/binary"
	"os"
	"strconv"
	"strings"
	"testing"
)

// corpusBytes reads the []byte of a one-value fuzz corpus file.
func corpusBytes(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[1])
	s = strings.TrimSuffix(strings.TrimPrefix(s, "[]byte("), ")")
	v, err := strconv.Unquote(s)
	if err != nil {
		t.Fatal(err)
	}
	return []byte(v)
}

// TestIPCBodyLengthBounded: a record batch message claiming a body of 32 GiB in a stream
// of 640 bytes is refused, by ReadIPC and by DecodePayload, without allocating it
// (arrow-go's ipc.NewReader does not apply its body size limit option: the readers are
// built on a message reader that does).
func TestIPCBodyLengthBounded(t *testing.T) {
	b := corpusBytes(t, "testdata/fuzz/FuzzReadIPC/body-length-oom")
	if _, _, err := ReadIPC(b); err == nil || !strings.Contains(err.Error(), "exceeds limit") {
		t.Fatalf("ReadIPC: %v, want the body length refused", err)
	}
	frame := []byte(payloadMagic + "\x01\x00\x00\x00")
	frame = binary.BigEndian.AppendUint32(frame, 1)
	frame = binary.BigEndian.AppendUint32(frame, 1)
	frame = binary.BigEndian.AppendUint32(frame, uint32(len(b)))
	if _, err := DecodePayload(append(frame, b...)); err == nil || !strings.Contains(err.Error(), "exceeds limit") {
		t.Fatalf("DecodePayload: %v, want the body length refused", err)
	}
}
