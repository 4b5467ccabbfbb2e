//go:build unix

package recordbatch

import "syscall"

// processCPU is the user+system CPU time of this process in seconds, or 0 if unknown.
func processCPU() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}
