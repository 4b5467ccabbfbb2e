package arrowenc

import (
	"errors"
	"os"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

func twoBatchPayload(t testing.TB) []byte {
	t.Helper()
	s, err := ParseSchema([]byte(`{"fields":[{"name":"id","type":"int64","nullable":false},{"name":"s","type":"utf8","nullable":true}]}`))
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	for f := 0; f < 2; f++ {
		b := array.NewRecordBuilder(memory.DefaultAllocator, s.Arrow())
		b.Field(0).(*array.Int64Builder).AppendValues([]int64{1, 2, 3}, nil)
		b.Field(1).(*array.StringBuilder).AppendValues([]string{"a", "b", "c"}, nil)
		r1 := b.NewRecordBatch()
		b.Field(0).(*array.Int64Builder).AppendValues([]int64{4, 5}, nil)
		b.Field(1).(*array.StringBuilder).AppendValues([]string{"d", "e"}, nil)
		r2 := b.NewRecordBatch()
		p, err := EncodePayload(uint32(f+1), r1, r2)
		if err != nil {
			t.Fatal(err)
		}
		r1.Release()
		r2.Release()
		b.Release()
		out = append(out, p...)
	}
	return out
}

// TestFrameMessages: a payload's frames and their record batch messages, without
// decoding, agree with DecodePayload; cut or changed bytes are ErrCorrupt.
func TestFrameMessages(t *testing.T) {
	p := twoBatchPayload(t)
	frames, err := SplitPayload(p)
	if err != nil || len(frames) != 2 || frames[1].SchemaID != 2 {
		t.Fatalf("split: %d frames, %v", len(frames), err)
	}
	for _, f := range frames {
		raws, err := FrameMessages(f.IPC)
		if err != nil {
			t.Fatal(err)
		}
		if len(raws) != 2 || raws[0].Rows != 3 || raws[1].Rows != 2 || len(raws[0].Body) == 0 {
			t.Fatalf("messages %+v", raws)
		}
		dec, err := DecodePayload(f.Bytes)
		if err != nil || Rows(dec) != 5 {
			t.Fatalf("decode of the frame alone: %v", err)
		}
		ReleaseFrames(dec)
	}
	ipc := frames[0].IPC
	for name, b := range map[string][]byte{
		"cut":          ipc[:len(ipc)-9],
		"no eos":       ipc[:len(ipc)-8],
		"after eos":    append(append([]byte{}, ipc...), 1),
		"no schema":    ipc[len(ipc)-8:],
		"empty":        nil,
		"bad metadata": append([]byte{0xff, 0xff, 0xff, 0xff, 200, 0, 0, 0}, ipc[8:]...),
	} {
		if _, err := FrameMessages(b); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := SplitPayload(p[:len(p)-1]); !errors.Is(err, ErrCorrupt) {
		t.Errorf("cut payload: %v", err)
	}
}

func FuzzFrameMessages(f *testing.F) {
	if b, err := os.ReadFile("testdata/v1/payload.bin"); err == nil {
		f.Add(b)
	}
	f.Add(twoBatchPayload(f))
	f.Fuzz(func(t *testing.T, p []byte) {
		frames, err := SplitPayload(p)
		if err != nil {
			return
		}
		for _, fr := range frames {
			raws, err := FrameMessages(fr.IPC)
			if err != nil {
				continue
			}
			var rows int64
			for _, r := range raws {
				rows += r.Rows
			}
			// A frame that decodes has the rows its messages say.
			if dec, err := DecodePayload(fr.Bytes); err == nil {
				if got := Rows(dec); got != rows {
					t.Fatalf("messages say %d rows, decoded %d", rows, got)
				}
				ReleaseFrames(dec)
			}
		}
	})
}
