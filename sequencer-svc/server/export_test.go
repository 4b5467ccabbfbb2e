package server

import (
	"errors"
	"os"
)

func removeFile(p string) error {
	if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// crash stops n the way a killed process looks to its peers: its connections drop at once
// (calls in flight fail), then Raft stops without handing leadership over.
func (n *Node) crash() {
	if n.rpc != nil {
		n.rpc.Stop()
	}
	n.Close()
}
