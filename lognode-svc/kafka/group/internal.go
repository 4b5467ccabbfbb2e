package group

import (
	"math"

	"github.com/loamhq/loam/shared/meta"
)

// OffsetsTopic is Kafka's internal topic of committed offsets. Loam keeps committed offsets
// in the sequencer (OffsetCommit, OffsetFetch), so the topic holds no records: the gateway
// lists it in Metadata as internal, because clients and tools expect it (KIP-848 regex
// subscriptions that name it resolve to it, as on Kafka), and serves it empty. A Loam stream
// of the same name is not reachable over the Kafka protocol.
const OffsetsTopic = "__consumer_offsets"

// offsetsStreamID is the stream id the internal topic is shown with: the sequencer never
// allocates it (ids count up from 1).
const offsetsStreamID = math.MaxUint64

// InternalStream answers the stream the gateway shows for the internal topic name in
// namespace ns, and whether name is an internal topic. It has one partition.
func InternalStream(ns, name string) (meta.Stream, bool) {
	if name != OffsetsTopic {
		return meta.Stream{}, false
	}
	return meta.Stream{ID: offsetsStreamID, StreamConfig: meta.StreamConfig{Namespace: ns, Name: name, Partitions: 1}}, true
}
