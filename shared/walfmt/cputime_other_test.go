//go:build !unix

package walfmt

func processCPU() float64 { return 0 }
