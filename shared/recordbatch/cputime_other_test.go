//go:build !unix

package recordbatch

func processCPU() float64 { return 0 }
