package meta

import "fmt"

// NotLeaderError is the ErrNotLeader a voter answers with when it knows (or guesses) who
// leads: Leader is the leader's sequencer RPC address, empty when unknown. It unwraps to
// ErrNotLeader, so callers test with errors.Is(err, ErrNotLeader) and pick the hint with
// errors.As.
type NotLeaderError struct {
	Leader string
}

func (e *NotLeaderError) Error() string {
	if e.Leader == "" {
		return ErrNotLeader.Error() + " (leader unknown)"
	}
	return fmt.Sprintf("%s (leader at %s)", ErrNotLeader.Error(), e.Leader)
}

// Unwrap returns ErrNotLeader.
func (e *NotLeaderError) Unwrap() error { return ErrNotLeader }
