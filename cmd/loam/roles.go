package main

import (
	"github.com/loamhq/loam/lognode-svc/lognodecmd"
	"github.com/loamhq/loam/sequencer-svc/sequencercmd"
)

// Role subcommands: `loam lognode ...` is lognode-svc and `loam sequencer ...` is
// sequencer-svc (with its members, remove and restore subcommands), the same flags and
// environment variables, so one installed binary runs every process of a cluster. The
// supervised `loam dev --sequencers N --nodes M` runs its children this way.
const (
	roleLognode   = "lognode"
	roleSequencer = "sequencer"
)

// runRole runs role with args (everything after the role's name); ok is false when name
// is not a role.
func runRole(name string, args []string) (ok bool, err error) {
	switch name {
	case roleLognode:
		return true, lognodecmd.Run(args)
	case roleSequencer:
		return true, sequencercmd.Main(args)
	}
	return false, nil
}
