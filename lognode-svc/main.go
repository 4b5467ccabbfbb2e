// Command lognode-svc runs one stateless log node; its flags and behaviour are documented in
// package lognodecmd, which `loam lognode` runs too.
package main

import (
	"fmt"
	"os"

	"github.com/loamhq/loam/lognode-svc/lognodecmd"
)

func main() {
	if err := lognodecmd.Run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "lognode-svc:", err)
		os.Exit(1)
	}
}
