package fsm

import (
	"bytes"
	"errors"
	"reflect"
	"testing"

	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/meta/metapb"
)

func scramKey() meta.APIKey {
	v := func(mech string, size int, b byte) meta.SCRAMVerifier {
		return meta.SCRAMVerifier{Mechanism: mech, Salt: bytes.Repeat([]byte{b}, 16), Iterations: 4096,
			StoredKey: bytes.Repeat([]byte{b + 1}, size), ServerKey: bytes.Repeat([]byte{b + 2}, size)}
	}
	return meta.APIKey{ID: "0123456789abcdef01234567", Namespace: "team-a", Hash: meta.KeyHash("loam_0123456789abcdef01234567_secret"),
		SCRAM: []meta.SCRAMVerifier{v("SCRAM-SHA-256", 32, 1), v("SCRAM-SHA-512", 64, 7)}}
}

// TestGoldenScramKeyCommand: a key created with SCRAM verifiers is a create_key command
// whose bytes are fixed (testdata/v4/create_key_scram.cmd), and decodes to the same
// verifiers.
func TestGoldenScramKeyCommand(t *testing.T) {
	cmd := CreateKey(scramKey())
	cmd.StampMs = t0 + 5
	const path = "testdata/v4/create_key_scram.cmd"
	b := golden(t, path, func() []byte { b, _ := Encode(cmd); return b })
	got, err := Decode(b)
	if err != nil || got.String() != cmd.String() {
		t.Fatalf("%s: %v: %v", path, err, got)
	}
	if enc, _ := Encode(cmd); !bytes.Equal(enc, b) {
		t.Fatalf("%s: encoding changed:\n got %x\nwant %x", path, enc, b)
	}
	k := metapb.ToAPIKey(got.GetAuth().GetCreateKey())
	if !reflect.DeepEqual(k.SCRAM, scramKey().SCRAM) {
		t.Fatalf("verifiers after a round trip: %+v", k.SCRAM)
	}
}

// TestScramKeyStoredAndFoundByID: the verifiers are stored with the key, never the key;
// LookupKeyByID and LookupKey answer them; malformed verifiers are refused.
func TestScramKeyStoredAndFoundByID(t *testing.T) {
	h := newHarness(t)
	h.apply(t0, CreateNamespace("team-a"))
	want := scramKey()
	if r := h.apply(t0+1, CreateKey(want)); r.Err != nil {
		t.Fatal(r.Err)
	}
	byID, err := h.f.LookupKeyByID(want.ID)
	if err != nil || !reflect.DeepEqual(byID.SCRAM, want.SCRAM) {
		t.Fatalf("by id: %v %+v", err, byID.SCRAM)
	}
	byHash, err := h.f.LookupKey(want.Hash)
	if err != nil || !reflect.DeepEqual(byHash.SCRAM, want.SCRAM) {
		t.Fatalf("by hash: %v %+v", err, byHash.SCRAM)
	}
	if _, err := h.f.LookupKeyByID("nope"); !errors.Is(err, meta.ErrKeyNotFound) {
		t.Fatalf("unknown id: %v", err)
	}
	for name, mutate := range map[string]func(*meta.APIKey){
		"unknown mechanism": func(k *meta.APIKey) { k.SCRAM[0].Mechanism = "SCRAM-MD5" },
		"two of one":        func(k *meta.APIKey) { k.SCRAM[1] = k.SCRAM[0] },
		"short digest":      func(k *meta.APIKey) { k.SCRAM[0].StoredKey = k.SCRAM[0].StoredKey[:8] },
		"few iterations":    func(k *meta.APIKey) { k.SCRAM[0].Iterations = 1 },
		"no salt":           func(k *meta.APIKey) { k.SCRAM[1].Salt = nil },
	} {
		k := scramKey()
		k.ID, k.Hash = "ff"+k.ID[2:], meta.KeyHash(name)
		mutate(&k)
		if r := h.apply(t0+2, CreateKey(k)); !errors.Is(r.Err, meta.ErrInvalidArgument) {
			t.Fatalf("%s: %v, want ErrInvalidArgument", name, r.Err)
		}
	}
}
