package metapb

import (
	"fmt"
	"time"

	"github.com/loamhq/loam/shared/meta"
)

// FromEventClaim converts a meta.EventClaim.
func FromEventClaim(c meta.EventClaim) *EventClaimCmd {
	return &EventClaimCmd{Namespace: c.Namespace, StreamId: c.StreamID, Node: c.Node, Claim: c.Claim,
		Keys: fromKeys(c.Keys), PendingMs: c.Pending.Milliseconds(), MaxEntries: c.MaxEntries}
}

// ToEventClaim converts an EventClaimCmd; a key that is not 32 bytes is an error.
func ToEventClaim(c *EventClaimCmd) (meta.EventClaim, error) {
	keys, err := toKeys(c.GetKeys())
	return meta.EventClaim{Namespace: c.GetNamespace(), StreamID: c.GetStreamId(), Node: c.GetNode(), Claim: c.GetClaim(),
		Keys: keys, Pending: time.Duration(c.GetPendingMs()) * time.Millisecond, MaxEntries: c.GetMaxEntries()}, err
}

// FromEventComplete converts a meta.EventComplete.
func FromEventComplete(c meta.EventComplete) *EventCompleteCmd {
	out := &EventCompleteCmd{Namespace: c.Namespace, StreamId: c.StreamID, Claim: c.Claim, WindowMs: c.Window.Milliseconds()}
	for _, d := range c.Done {
		out.Done = append(out.Done, &EventDone{Key: append([]byte(nil), d.Key[:]...), Partition: d.Partition, Offset: d.Offset})
	}
	return out
}

// ToEventComplete converts an EventCompleteCmd.
func ToEventComplete(c *EventCompleteCmd) (meta.EventComplete, error) {
	out := meta.EventComplete{Namespace: c.GetNamespace(), StreamID: c.GetStreamId(), Claim: c.GetClaim(),
		Window: time.Duration(c.GetWindowMs()) * time.Millisecond}
	for i, d := range c.GetDone() {
		if len(d.GetKey()) != 32 {
			return out, fmt.Errorf("%w: done[%d]: key of %d bytes, want 32", meta.ErrInvalidArgument, i, len(d.GetKey()))
		}
		out.Done = append(out.Done, meta.EventDone{Key: meta.EventKey(d.GetKey()), Partition: d.GetPartition(), Offset: d.GetOffset()})
	}
	return out, nil
}

// FromEventRelease converts a meta.EventRelease.
func FromEventRelease(r meta.EventRelease) *EventReleaseCmd {
	return &EventReleaseCmd{Namespace: r.Namespace, StreamId: r.StreamID, Claim: r.Claim, Keys: fromKeys(r.Keys)}
}

// ToEventRelease converts an EventReleaseCmd.
func ToEventRelease(r *EventReleaseCmd) (meta.EventRelease, error) {
	keys, err := toKeys(r.GetKeys())
	return meta.EventRelease{Namespace: r.GetNamespace(), StreamID: r.GetStreamId(), Claim: r.GetClaim(), Keys: keys}, err
}

// FromEventAnswers converts claim answers.
func FromEventAnswers(as []meta.EventClaimAnswer) *ClaimEventsResponse {
	out := &ClaimEventsResponse{Answers: make([]*EventClaimAnswer, len(as))}
	for i, a := range as {
		out.Answers[i] = &EventClaimAnswer{Status: uint32(a.Status), Partition: a.Partition, Offset: a.Offset}
	}
	return out
}

// ToEventAnswers converts a ClaimEventsResponse.
func ToEventAnswers(r *ClaimEventsResponse) []meta.EventClaimAnswer {
	out := make([]meta.EventClaimAnswer, len(r.GetAnswers()))
	for i, a := range r.GetAnswers() {
		out[i] = meta.EventClaimAnswer{Status: meta.EventStatus(a.GetStatus()), Partition: a.GetPartition(), Offset: a.GetOffset()}
	}
	return out
}

func fromKeys(keys []meta.EventKey) [][]byte {
	out := make([][]byte, len(keys))
	for i := range keys {
		out[i] = append([]byte(nil), keys[i][:]...)
	}
	return out
}

func toKeys(keys [][]byte) ([]meta.EventKey, error) {
	out := make([]meta.EventKey, len(keys))
	for i, k := range keys {
		if len(k) != 32 {
			return nil, fmt.Errorf("%w: keys[%d]: %d bytes, want 32", meta.ErrInvalidArgument, i, len(k))
		}
		out[i] = meta.EventKey(k)
	}
	return out, nil
}
