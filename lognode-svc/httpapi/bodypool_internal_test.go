package httpapi

import (
	"testing"
)

// TestBodyPoolClasses: every length gets a buffer that holds it and wastes at most a
// quarter of it (above the smallest class); a returned buffer is reused for its class.
func TestBodyPoolClasses(t *testing.T) {
	p := newBodyPool(DefaultMaxRequestBytes)
	for _, n := range []int{1, 100, 4096, 4097, 5000, 5120, 5121, 65536, 65537, 100_000, 1 << 20, DefaultMaxRequestBytes + 1} {
		b := p.get(n)
		if len(b) != n || cap(b) < n {
			t.Fatalf("get(%d): len %d cap %d", n, len(b), cap(b))
		}
		if n > bodyPoolMinSize && cap(b) > n+n/4 {
			t.Fatalf("get(%d): cap %d, more than a quarter over", n, cap(b))
		}
		if c := sizeClass(cap(b)); classSize(c) != cap(b) {
			t.Fatalf("get(%d): cap %d is not a class size (class %d has %d)", n, cap(b), c, classSize(c))
		}
		p.put(b)
		if again := p.get(n); &again[:1][0] != &b[:1][0] {
			t.Fatalf("get(%d) after put: a new buffer, want the returned one", n)
		}
	}
}

// TestBodyPoolBounded: idle buffers add up to at most bodyPoolIdleRequests ×
// MaxRequestBytes; buffers not of the pool's sizes (larger than the request limit) are
// dropped.
func TestBodyPoolBounded(t *testing.T) {
	const limit = 1 << 20
	p := newBodyPool(limit)
	var bufs [][]byte
	for range 3 * bodyPoolIdleRequests {
		bufs = append(bufs, p.get(limit+1))
	}
	for _, b := range bufs {
		p.put(b)
	}
	if p.idle > bodyPoolIdleRequests*limit {
		t.Fatalf("%d idle bytes, want at most %d", p.idle, bodyPoolIdleRequests*limit)
	}
	if p.idle == 0 {
		t.Fatal("nothing kept")
	}
	p.put(make([]byte, 4*limit))
	p.put(make([]byte, 10_000)) // not a class size
	before := p.idle
	p.put(make([]byte, 0, classSize(sizeClass(4*limit))))
	if p.idle != before {
		t.Fatalf("a buffer over the request limit was kept")
	}
}
