package main

import (
	"context"
	"fmt"
	"hash/crc32"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// calibration is one repetition's machine limits.
type calibration struct {
	LoopbackMBps, MemcpyGBps, CRC32CGBps float64
	Fsync4KP50, Fsync4KP99               float64 // ms
	Fsync8MP50, Fsync8MP99               float64 // ms
}

// calibrate measures this machine's limits: loopback TCP from this process (load CPU) to a
// sink child (server CPU), memcpy of 64 MiB buffers (DRAM), CRC32C of an 8 MiB buffer
// (a WAL object), and write+fsync of 4 KiB
// and 8 MiB files in dir (the disk the servers' data directories are on).
func (s *suite) calibrate(ctx context.Context, dir string) (calibration, error) {
	var c calibration
	sink, err := s.pin.startChild(ctx, "sink", s.self, s.serveArgs("sink", "calibrate"), true, "")
	if err != nil {
		return c, err
	}
	defer sink.stop()
	conn, err := net.Dial("tcp", sink.ready["addr"])
	if err != nil {
		return c, err
	}
	buf := make([]byte, 1<<20)
	var n int64
	t0 := time.Now()
	for time.Since(t0) < s.calDur {
		m, err := conn.Write(buf)
		if err != nil {
			conn.Close()
			return c, fmt.Errorf("suite: loopback: %w", err)
		}
		n += int64(m)
	}
	c.LoopbackMBps = float64(n) / time.Since(t0).Seconds() / 1e6
	conn.Close()

	src, dst := make([]byte, 64<<20), make([]byte, 64<<20) // beyond the caches: DRAM
	for i := range src {
		src[i] = byte(i)
	}
	n = 0
	t0 = time.Now()
	for time.Since(t0) < s.calDur {
		copy(dst, src)
		n += int64(len(src))
	}
	c.MemcpyGBps = float64(n) / time.Since(t0).Seconds() / 1e9

	tab := crc32.MakeTable(crc32.Castagnoli)
	var sum uint32
	n = 0
	t0 = time.Now()
	for time.Since(t0) < s.calDur {
		sum = crc32.Update(sum, tab, src[:8<<20])
		n += 8 << 20
	}
	c.CRC32CGBps = float64(n) / time.Since(t0).Seconds() / 1e9
	_ = sum

	if c.Fsync4KP50, c.Fsync4KP99, err = fsyncLatency(filepath.Join(dir, "fsync-4k"), 4<<10, s.fsyncN4K); err != nil {
		return c, err
	}
	if c.Fsync8MP50, c.Fsync8MP99, err = fsyncLatency(filepath.Join(dir, "fsync-8m"), 8<<20, s.fsyncN8M); err != nil {
		return c, err
	}
	return c, nil
}

// fsyncLatency writes size bytes and fsyncs, n times, into one file (rewritten from the
// start each time), and returns the p50 and p99 of write+fsync in ms.
func fsyncLatency(path string, size, n int) (p50, p99 float64, err error) {
	f, err := os.Create(path)
	if err != nil {
		return 0, 0, err
	}
	defer os.Remove(path)
	defer f.Close()
	buf := make([]byte, size)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	lats := make([]float64, 0, n)
	for range n {
		t0 := time.Now()
		if _, err := f.WriteAt(buf, 0); err != nil {
			return 0, 0, err
		}
		if err := f.Sync(); err != nil {
			return 0, 0, err
		}
		lats = append(lats, float64(time.Since(t0).Microseconds())/1000)
	}
	slices.Sort(lats)
	q := func(p float64) float64 { return lats[min(len(lats)-1, int(p*float64(len(lats))))] }
	return q(0.50), q(0.99), nil
}
