package fsm

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/proto"
)

type memSink struct{ *bytes.Buffer }

func (s *memSink) ID() string    { return "mem" }
func (s *memSink) Cancel() error { return nil }
func (s *memSink) Close() error  { return nil }

type nopCloser struct{ io.Reader }

func (nopCloser) Close() error { return nil }

// dumpState prints every bucket's keys and values, for equality checks.
func dumpState(t *testing.T, f *FSM) string {
	t.Helper()
	var b strings.Builder
	err := f.view(func(tx *bolt.Tx) error {
		for _, name := range allBuckets {
			fmt.Fprintf(&b, "[%s]\n", name)
			if err := tx.Bucket(name).ForEach(func(k, v []byte) error {
				fmt.Fprintf(&b, "%x=%x\n", k, v)
				return nil
			}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func protoUnmarshal(b []byte, m proto.Message) error { return proto.Unmarshal(b, m) }
