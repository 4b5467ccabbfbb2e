package supervisor

import (
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
)

// journalArgs are log node i's quorum-class flags (docs/quorum.md) when the cluster runs
// a journal (Config.JournalPort > 0) and has three log nodes or more: node-1..node-3 are
// its members, each listening on JournalPort+i with its log in <dir>/<id>/journal; the
// other nodes listen too (to forward produces) but host no member.
func journalArgs(cfg Config, dir string, i int) []string {
	if cfg.JournalPort <= 0 || cfg.Nodes < 3 {
		return nil
	}
	addr := func(j int) string {
		id := fmt.Sprintf("node-%d", j+1)
		return net.JoinHostPort(cfg.hostOf(id), strconv.Itoa(cfg.JournalPort+j))
	}
	voters := make([]string, 3)
	for j := range voters {
		voters[j] = fmt.Sprintf("node-%d=%s", j+1, addr(j))
	}
	id := fmt.Sprintf("node-%d", i+1)
	return []string{"--journal-addr", addr(i), "--journal-dir", filepath.Join(dir, id, "journal"), "--journal-voters", strings.Join(voters, ",")}
}
