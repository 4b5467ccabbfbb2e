package group

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// FuzzSubscribedTopics: arbitrary member metadata never panics; a metadata that decodes
// re-encodes (at its version) to bytes that decode to the same topics.
func FuzzSubscribedTopics(f *testing.F) {
	for v := int16(0); v <= 3; v++ {
		m := kmsg.NewConsumerMemberMetadata()
		m.Version, m.Topics, m.UserData = v, []string{"orders", "logs"}, []byte("u")
		op := kmsg.NewConsumerMemberMetadataOwnedPartition()
		op.Topic, op.Partitions = "orders", []int32{0, 3}
		m.OwnedPartitions, m.Generation, m.Rack = []kmsg.ConsumerMemberMetadataOwnedPartition{op}, 7, strp("az1")
		f.Add(m.AppendTo(nil))
	}
	f.Add([]byte{})
	f.Add([]byte{0, 0, 0x7f, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		topics, err := SubscribedTopics(b)
		if err != nil {
			return
		}
		var m kmsg.ConsumerMemberMetadata
		_ = m.ReadFrom(b)
		again, err := SubscribedTopics(m.AppendTo(nil))
		if err != nil || !slices.Equal(again, topics) {
			t.Fatalf("round trip: %q → %q (%v)", topics, again, err)
		}
	})
}

// FuzzAssignedPartitions: arbitrary member assignments never panic; one that decodes
// re-encodes to the same partitions.
func FuzzAssignedPartitions(f *testing.F) {
	for v := int16(0); v <= 3; v++ {
		a := kmsg.NewConsumerMemberAssignment()
		a.Version = v
		at := kmsg.NewConsumerMemberAssignmentTopic()
		at.Topic, at.Partitions = "orders", []int32{1, 2}
		a.Topics, a.UserData = []kmsg.ConsumerMemberAssignmentTopic{at}, []byte("x")
		f.Add(a.AppendTo(nil))
	}
	f.Add([]byte{0, 1, 0, 0, 0, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := AssignedPartitions(b)
		if err != nil {
			return
		}
		var a kmsg.ConsumerMemberAssignment
		_ = a.ReadFrom(b)
		again, err := AssignedPartitions(a.AppendTo(nil))
		if err != nil || len(again) != len(got) {
			t.Fatalf("round trip: %v → %v (%v)", got, again, err)
		}
		for k, ps := range got {
			if !slices.Equal(again[k], ps) {
				t.Fatalf("round trip of %s: %v → %v", k, ps, again[k])
			}
		}
	})
}
