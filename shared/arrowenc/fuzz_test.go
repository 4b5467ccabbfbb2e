package arrowenc

import (
	"os"
	"testing"
)

func FuzzParseSchema(f *testing.F) {
	f.Add([]byte(fullSchema))
	f.Add([]byte(`{"fields":[{"name":"a","type":"list","item":{"type":"struct","fields":[{"name":"b","type":"int8"}]}}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := ParseSchema(b)
		if err != nil {
			return
		}
		// A valid schema converts, and its IPC form reads back to the same schema.
		back, err := ParseIPCSchema(s.IPC())
		if err != nil {
			t.Fatalf("IPC of a valid schema: %v", err)
		}
		if string(back.JSON()) != string(s.JSON()) {
			t.Fatalf("IPC round trip: %s != %s", back.JSON(), s.JSON())
		}
	})
}

func FuzzParseIPCSchema(f *testing.F) {
	if b, err := os.ReadFile("testdata/v1/schema.arrows"); err == nil {
		f.Add(b)
	}
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 8, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := ParseIPCSchema(b)
		if err != nil {
			return
		}
		if err := s.Validate(); err != nil {
			t.Fatalf("ParseIPCSchema returned an invalid schema: %v", err)
		}
	})
}

func FuzzDecodePayload(f *testing.F) {
	if b, err := os.ReadFile("testdata/v1/payload.bin"); err == nil {
		f.Add(b)
	}
	f.Add([]byte("LARW\x01\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x01\x00\x00\x00\x08\xff\xff\xff\xff\x00\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		fs, err := DecodePayload(b)
		if err != nil {
			return
		}
		defer ReleaseFrames(fs)
		for _, f := range fs {
			all, _ := Project(f.Schema, nil)
			for _, batch := range f.Batches {
				for i := 0; i < int(batch.NumRows()); i++ {
					AppendRowJSON(nil, batch, i, all)
					RowHeaders(batch, i)
				}
			}
		}
	})
}
