package pricing_test

import (
	"math"
	"strings"
	"testing"

	"github.com/loamhq/loam/shared/pricing"
)

func TestPerGiB(t *testing.T) {
	tests := []struct {
		name                     string
		class                    pricing.Class
		puts, gets, readsPerByte float64
		want                     float64
	}{
		// 8 MiB WAL objects: 128 PUTs per GiB at $0.005 per 1,000.
		{"standard, 8 MiB objects", pricing.S3Standard, 128, 0, 0, 128 * 0.005 / 1000},
		{"standard, PUTs and GETs", pricing.S3Standard, 1000, 1000, 1, 0.005 + 0.0004},
		{"express adds the upload fee", pricing.S3Express, 1000, 0, 0, 0.00113 + 0.0032},
		{"express read back once", pricing.S3Express, 0, 1000, 1, 0.00003 + 0.0032 + 0.0006},
		{"nothing", pricing.S3Standard, 0, 0, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.class.PerGiB(tt.puts, tt.gets, tt.readsPerByte); math.Abs(got-tt.want) > 1e-12 {
				t.Errorf("PerGiB = %.9f, want %.9f", got, tt.want)
			}
		})
	}
}

func TestCostScalesWithUsage(t *testing.T) {
	u := pricing.Usage{Puts: 12345, Gets: 678, BytesPut: 3 << 30, BytesGot: 1 << 30}
	one := pricing.S3Express.Cost(u)
	u2 := pricing.Usage{Puts: 2 * u.Puts, Gets: 2 * u.Gets, BytesPut: 2 * u.BytesPut, BytesGot: 2 * u.BytesGot}
	if two := pricing.S3Express.Cost(u2); math.Abs(two-2*one) > 1e-12 {
		t.Fatalf("twice the usage costs %v, want 2 × %v", two, one)
	}
}

func TestClassNamed(t *testing.T) {
	for _, c := range []pricing.Class{pricing.S3Standard, pricing.S3Express} {
		got, err := pricing.ClassNamed(c.Name)
		if err != nil || got != c {
			t.Errorf("ClassNamed(%q) = %+v, %v", c.Name, got, err)
		}
	}
	if _, err := pricing.ClassNamed("glacier"); err == nil || !strings.Contains(err.Error(), `"glacier"`) {
		t.Errorf("unknown class: %v, want an error naming it", err)
	}
}
