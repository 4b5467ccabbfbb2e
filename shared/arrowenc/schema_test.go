package arrowenc

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
)

const fullSchema = `{"fields":[
 {"name":"id","type":"int64","nullable":false},
 {"name":"name","type":"utf8","nullable":true},
 {"name":"ts","type":"timestamp","unit":"ms","timezone":"UTC","nullable":false},
 {"name":"day","type":"date32","nullable":true},
 {"name":"price","type":"decimal128","precision":10,"scale":2,"nullable":true},
 {"name":"ok","type":"bool","nullable":true},
 {"name":"raw","type":"binary","nullable":true},
 {"name":"score","type":"float64","nullable":true},
 {"name":"tags","type":"list","nullable":true,"item":{"name":"item","type":"utf8","nullable":true}},
 {"name":"addr","type":"struct","nullable":true,"fields":[{"name":"city","type":"utf8","nullable":true},{"name":"zip","type":"uint32","nullable":true}]}
],"key":"id","timestamp":"ts"}`

func mustParse(t testing.TB, s string) *Schema {
	t.Helper()
	sc, err := ParseSchema([]byte(s))
	if err != nil {
		t.Fatalf("ParseSchema: %v", err)
	}
	return sc
}

func TestParseSchemaArrow(t *testing.T) {
	s := mustParse(t, fullSchema)
	as := s.Arrow()
	want := []string{"int64", "utf8", "timestamp[ms, tz=UTC]", "date32", "decimal(10, 2)", "bool", "binary", "float64", "list<item: utf8, nullable>", "struct<city: utf8 nullable, zip: uint32 nullable>"}
	if len(as.Fields()) != len(want) {
		t.Fatalf("fields = %d", len(as.Fields()))
	}
	for i, f := range as.Fields() {
		if f.Type.String() != want[i] {
			t.Errorf("field %s: type %s, want %s", f.Name, f.Type, want[i])
		}
	}
	if as.Field(0).Nullable || !as.Field(1).Nullable {
		t.Errorf("nullability lost")
	}
	if k, _ := as.Metadata().GetValue("loam.key"); k != "id" {
		t.Errorf("loam.key = %q", k)
	}
}

func TestSchemaIPCRoundTrip(t *testing.T) {
	s := mustParse(t, fullSchema)
	s.AddHeadersColumn()
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	back, err := ParseIPCSchema(s.IPC())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(back.JSON(), s.JSON()) {
		t.Fatalf("round trip:\n got %s\nwant %s", back.JSON(), s.JSON())
	}
	if !back.Arrow().Equal(s.Arrow()) {
		t.Fatal("arrow schemas differ")
	}
}

// The IPC schema message of a fixed schema is pinned: a change of the encoding is a
// format change.
func TestSchemaIPCGolden(t *testing.T) {
	s := mustParse(t, fullSchema)
	got := s.IPC()
	const path = "testdata/v1/schema.arrows"
	if os.Getenv("ARROWENC_WRITE_GOLDEN") != "" {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("IPC schema bytes differ from %s", path)
	}
	back, err := ParseIPCSchema(want)
	if err != nil || !bytes.Equal(back.JSON(), s.JSON()) {
		t.Fatalf("golden does not decode to the schema: %v", err)
	}
}

func TestParseSchemaErrors(t *testing.T) {
	cases := []struct{ in, want string }{
		{`{"fields":[]}`, "no fields"},
		{`{"fields":[{"name":"a","type":"int65"}]}`, `field a: unknown type "int65"`},
		{`{"fields":[{"name":"a"}]}`, "field a: no type"},
		{`{"fields":[{"name":"a","type":"int8"},{"name":"a","type":"int8"}]}`, "field a: duplicate name"},
		{`{"fields":[{"name":"","type":"int8"}]}`, "empty name"},
		{`{"fields":[{"name":"a.b","type":"int8"}]}`, "holds '.'"},
		{`{"fields":[{"name":"t","type":"timestamp","unit":"days"}]}`, `field t: timestamp unit "days"`},
		{`{"fields":[{"name":"t","type":"int64","unit":"ms"}]}`, "type int64 takes no unit"},
		{`{"fields":[{"name":"d","type":"decimal128","precision":40}]}`, "precision 40"},
		{`{"fields":[{"name":"d","type":"decimal128","precision":4,"scale":5}]}`, "scale 5"},
		{`{"fields":[{"name":"l","type":"list"}]}`, "field l: list without item"},
		{`{"fields":[{"name":"l","type":"list","item":{"type":"nope"}}]}`, `field l[]: unknown type "nope"`},
		{`{"fields":[{"name":"s","type":"struct"}]}`, "struct without fields"},
		{`{"fields":[{"name":"s","type":"struct","fields":[{"name":"x","type":"bad"}]}]}`, `field s.x: unknown type "bad"`},
		{`{"fields":[{"name":"a","type":"int8"}],"key":"b"}`, `key column "b" is not a field`},
		{`{"fields":[{"name":"a","type":"list","item":{"type":"int8"}}],"key":"a"}`, `key column "a": type list`},
		{`{"fields":[{"name":"a","type":"int8"}],"timestamp":"a"}`, `timestamp column "a": type int8`},
		{`{"fields":[{"name":"a","type":"int8"}],"headers":"keep"}`, `headers "keep"`},
		{`{"fields":[{"name":"a","type":"int8"}],"headers":"column"}`, `no "_headers" column`},
		{`{"fields":[{"name":"_headers","type":"int8"}]}`, `reserved for headers`},
		{`{"fields":[{"name":"a","type":"int8"}],"extra":1}`, `unknown field "extra"`},
		{`{"fields":[{"name":"a","type":"int8"}]} x`, "trailing data"},
		{`[`, "invalid schema"},
	}
	for _, c := range cases {
		_, err := ParseSchema([]byte(c.in))
		if err == nil || !errors.Is(err, ErrInvalidSchema) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseSchema(%s) = %v, want an error with %q", c.in, err, c.want)
		}
	}
}

func TestParseIPCSchemaErrors(t *testing.T) {
	if _, err := ParseIPCSchema([]byte("not arrow")); !errors.Is(err, ErrInvalidSchema) {
		t.Errorf("garbage: %v", err)
	}
	// A valid Arrow schema with a type outside the model is refused by name.
	as := arrow.NewSchema([]arrow.Field{{Name: "d", Type: arrow.FixedWidthTypes.Duration_s}}, nil)
	if _, err := FromArrow(as); err == nil || !strings.Contains(err.Error(), "duration") {
		t.Errorf("duration: %v", err)
	}
}

func TestCheckEvolution(t *testing.T) {
	base := `{"name":"id","type":"int64","nullable":false},{"name":"name","type":"utf8","nullable":true}`
	prev := mustParse(t, `{"fields":[`+base+`],"key":"id"}`)
	ok := []string{
		`{"fields":[` + base + `],"key":"id"}`,
		`{"fields":[` + base + `,{"name":"age","type":"int32","nullable":true}],"key":"id"}`,
	}
	for _, s := range ok {
		if err := CheckEvolution(prev, mustParse(t, s)); err != nil {
			t.Errorf("%s: %v", s, err)
		}
	}
	bad := []struct{ in, want string }{
		{`{"fields":[` + base + `,{"name":"age","type":"int32","nullable":false}],"key":"id"}`, `added column "age" must be nullable`},
		{`{"fields":[{"name":"id","type":"int64","nullable":false}],"key":"id"}`, `column "name" removed`},
		{`{"fields":[{"name":"id","type":"int32","nullable":false},{"name":"name","type":"utf8","nullable":true}],"key":"id"}`, `column "id" changed type`},
		{`{"fields":[{"name":"id","type":"int64","nullable":true},{"name":"name","type":"utf8","nullable":true}],"key":"id"}`, `column "id" changed type or nullability`},
		{`{"fields":[{"name":"id","type":"int64","nullable":false},{"name":"nom","type":"utf8","nullable":true}],"key":"id"}`, `column 1 is "nom", was "name"`},
		{`{"fields":[` + base + `]}`, "key, timestamp and headers settings cannot change"},
	}
	for _, c := range bad {
		err := CheckEvolution(prev, mustParse(t, c.in))
		if err == nil || !errors.Is(err, ErrInvalidSchema) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.in, err, c.want)
		}
	}
}
