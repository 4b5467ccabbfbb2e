package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// TestCost runs the measuring cluster briefly and checks the bills are built from what it
// counted.
func TestCost(t *testing.T) {
	if testing.Short() {
		t.Skip("runs an in-process cluster for 2 s")
	}
	var out, errOut bytes.Buffer
	err := dispatch(context.Background(), []string{"cost", "--measure", "2s", "--measure-rate", "2", "--rates", "10,100", "--json"}, strings.NewReader(""), &out, &errOut)
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut.String())
	}
	var got struct {
		Measured map[string]float64
		Run      struct{ WALPuts, Flushes, BytesProduced int64 }
		Bills    []struct {
			MiBps float64
			Nodes int
			Loam  []struct {
				Item    string
				Monthly float64
			}
		}
	}
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if got.Run.WALPuts == 0 || got.Run.Flushes == 0 || got.Run.BytesProduced < 3<<20 {
		t.Fatalf("measuring run: %+v", got.Run)
	}
	if got.Measured["PutsPerFlush"] < 1 || got.Measured["SegmenterGetsPerWAL"] < 1 || got.Measured["CoordWritesPerWAL"] <= 0 {
		t.Errorf("measured %v", got.Measured)
	}
	if len(got.Bills) != 2 || got.Bills[0].Nodes != 3 || got.Bills[1].Nodes != 6 {
		t.Fatalf("bills %+v", got.Bills)
	}
	for _, l := range got.Bills[0].Loam {
		if l.Monthly < 0 {
			t.Errorf("%s: $%v", l.Item, l.Monthly)
		}
	}
	// The text form prints both systems and the ratio.
	out.Reset()
	if err := dispatch(context.Background(), []string{"cost", "--measure", "1s", "--measure-rate", "1", "--rates", "10"}, strings.NewReader(""), &out, &errOut); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Loam, standard class", "Loam, express class", "Kafka, 3 brokers, RF 3", "Kafka / Loam standard:", "S3 PUT (WAL objects)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if err := dispatch(context.Background(), []string{"cost", "--rates", "ten"}, strings.NewReader(""), &out, &errOut); err == nil {
		t.Error("--rates ten accepted")
	}
}
