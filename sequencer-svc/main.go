// Command sequencer-svc runs one voter of Loam's Raft metastore (the sequencer), or one of its
// subcommands; its flags and behaviour are documented in package sequencercmd, which
// `loam sequencer` runs too.
package main

import (
	"fmt"
	"os"

	"github.com/loamhq/loam/sequencer-svc/sequencercmd"
)

func main() {
	if err := sequencercmd.Main(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "sequencer-svc:", err)
		os.Exit(1)
	}
}
