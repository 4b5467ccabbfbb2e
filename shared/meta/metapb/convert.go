package metapb

import (
	"math"

	"github.com/loamhq/loam/shared/meta"
)

// Conversions between the Go types of package meta and their wire messages. A nil message
// converts to the zero value.

func FromStreamConfig(c meta.StreamConfig) *StreamConfig {
	return &StreamConfig{
		Namespace: c.Namespace, Name: c.Name, Partitions: c.Partitions, Class: c.Class,
		Encoding: c.Encoding, RetentionMs: c.RetentionMs, RetentionBytes: c.RetentionBytes,
		CleanupPolicy: c.CleanupPolicy, KeyAttribute: c.KeyAttribute, MaxMessageBytes: c.MaxMessageBytes,
		LeaderZone: c.LeaderZone,
	}
}

func ToStreamConfig(c *StreamConfig) meta.StreamConfig {
	return meta.StreamConfig{
		Namespace: c.GetNamespace(), Name: c.GetName(), Partitions: c.GetPartitions(),
		Class: c.GetClass(), Encoding: c.GetEncoding(), RetentionMs: c.GetRetentionMs(),
		RetentionBytes: c.GetRetentionBytes(), CleanupPolicy: c.GetCleanupPolicy(),
		KeyAttribute: c.GetKeyAttribute(), MaxMessageBytes: c.GetMaxMessageBytes(), LeaderZone: c.GetLeaderZone(),
	}
}

func FromStream(s meta.Stream) *Stream {
	return &Stream{Id: s.ID, CreatedAtMs: s.CreatedAtMs, Config: FromStreamConfig(s.StreamConfig)}
}

func ToStream(s *Stream) meta.Stream {
	return meta.Stream{ID: s.GetId(), CreatedAtMs: s.GetCreatedAtMs(), StreamConfig: ToStreamConfig(s.GetConfig())}
}

func FromStreamPatch(p meta.StreamPatch) *StreamPatch {
	return &StreamPatch{
		Partitions: p.Partitions, RetentionMs: p.RetentionMs, RetentionBytes: p.RetentionBytes,
		CleanupPolicy: p.CleanupPolicy, KeyAttribute: p.KeyAttribute, MaxMessageBytes: p.MaxMessageBytes,
		LeaderZone: p.LeaderZone,
	}
}

func ToStreamPatch(p *StreamPatch) meta.StreamPatch {
	if p == nil {
		return meta.StreamPatch{}
	}
	return meta.StreamPatch{
		Partitions: p.Partitions, RetentionMs: p.RetentionMs, RetentionBytes: p.RetentionBytes,
		CleanupPolicy: p.CleanupPolicy, KeyAttribute: p.KeyAttribute, MaxMessageBytes: p.MaxMessageBytes,
		LeaderZone: p.LeaderZone,
	}
}

func FromPartitionState(s meta.PartitionState) *PartitionState {
	return &PartitionState{
		StreamId: s.StreamID, Partition: s.Partition, LogStart: s.LogStart,
		HighWatermark: s.HighWatermark, Bytes: s.Bytes,
	}
}

func ToPartitionState(s *PartitionState) meta.PartitionState {
	return meta.PartitionState{
		StreamID: s.GetStreamId(), Partition: s.GetPartition(), LogStart: s.GetLogStart(),
		HighWatermark: s.GetHighWatermark(), Bytes: s.GetBytes(),
	}
}

func FromIndexEntry(e meta.IndexEntry) *IndexEntry {
	return &IndexEntry{
		BaseOffset: e.BaseOffset, Count: e.Count, Kind: uint32(e.Kind), Object: e.Object,
		Offset: e.Offset, Length: e.Length, MaxTimestamp: e.MaxTimestamp,
	}
}

func ToIndexEntry(e *IndexEntry) meta.IndexEntry {
	return meta.IndexEntry{
		BaseOffset: e.GetBaseOffset(), Count: e.GetCount(), Kind: meta.EntryKind(e.GetKind()),
		Object: e.GetObject(), Offset: e.GetOffset(), Length: e.GetLength(),
		MaxTimestamp: e.GetMaxTimestamp(),
	}
}

func FromIndexEntries(es []meta.IndexEntry) []*IndexEntry {
	if len(es) == 0 {
		return nil
	}
	out := make([]*IndexEntry, len(es))
	for i, e := range es {
		out[i] = FromIndexEntry(e)
	}
	return out
}

func ToIndexEntries(es []*IndexEntry) []meta.IndexEntry {
	if len(es) == 0 {
		return nil
	}
	out := make([]meta.IndexEntry, len(es))
	for i, e := range es {
		out[i] = ToIndexEntry(e)
	}
	return out
}

func FromEvent(ev meta.Event) *Event {
	out := &Event{AppliedIndex: ev.AppliedIndex, StreamsChanged: ev.StreamsChanged, Reset_: ev.Reset, JournalsChanged: ev.JournalsChanged}
	if len(ev.Partitions) > 0 {
		out.Partitions = make([]*PartitionUpdate, len(ev.Partitions))
		for i, p := range ev.Partitions {
			out.Partitions[i] = &PartitionUpdate{
				StreamId: p.StreamID, Partition: p.Partition, LogStart: p.LogStart,
				HighWatermark: p.HighWatermark, Added: FromIndexEntries(p.Added), Replaced: p.Replaced,
			}
		}
	}
	return out
}

func ToEvent(ev *Event) meta.Event {
	out := meta.Event{AppliedIndex: ev.GetAppliedIndex(), StreamsChanged: ev.GetStreamsChanged(), Reset: ev.GetReset_(), JournalsChanged: ev.GetJournalsChanged()}
	if ps := ev.GetPartitions(); len(ps) > 0 {
		out.Partitions = make([]meta.PartitionUpdate, len(ps))
		for i, p := range ps {
			out.Partitions[i] = meta.PartitionUpdate{
				StreamID: p.GetStreamId(), Partition: p.GetPartition(), LogStart: p.GetLogStart(),
				HighWatermark: p.GetHighWatermark(), Added: ToIndexEntries(p.GetAdded()),
				Replaced: p.GetReplaced(),
			}
		}
	}
	return out
}

func FromChunks(cs []meta.Chunk) []*Chunk {
	out := make([]*Chunk, len(cs))
	for i, c := range cs {
		out[i] = &Chunk{
			StreamId: c.StreamID, Partition: c.Partition, Records: c.Records, Offset: c.Offset,
			Length: c.Length, MaxTimestamp: c.MaxTimestamp,
			ProducerId: c.Producer.ID, ProducerEpoch: int32(c.Producer.Epoch), BaseSequence: c.Producer.BaseSequence,
		}
	}
	return out
}

func ToChunks(cs []*Chunk) []meta.Chunk {
	out := make([]meta.Chunk, len(cs))
	for i, c := range cs {
		out[i] = meta.Chunk{
			StreamID: c.GetStreamId(), Partition: c.GetPartition(), Records: c.GetRecords(),
			Offset: c.GetOffset(), Length: c.GetLength(), MaxTimestamp: c.GetMaxTimestamp(),
			Producer: meta.ChunkProducer{ID: c.GetProducerId(), Epoch: Epoch16(c.GetProducerEpoch()), BaseSequence: c.GetBaseSequence()},
		}
	}
	return out
}

func FromLease(l meta.Lease) *Lease {
	return &Lease{
		StreamId: l.StreamID, Partition: l.Partition, Kind: l.Kind, Holder: l.Holder,
		Epoch: l.Epoch, ExpiresMs: l.ExpiresMs,
	}
}

func ToLease(l *Lease) meta.Lease {
	return meta.Lease{
		StreamID: l.GetStreamId(), Partition: l.GetPartition(), Kind: l.GetKind(),
		Holder: l.GetHolder(), Epoch: l.GetEpoch(), ExpiresMs: l.GetExpiresMs(),
	}
}

func FromRetired(rs []meta.RetiredObject) []*RetiredObject {
	if len(rs) == 0 {
		return nil
	}
	out := make([]*RetiredObject, len(rs))
	for i, r := range rs {
		out[i] = &RetiredObject{Key: r.Key, RetiredMs: r.RetiredMs}
	}
	return out
}

func ToRetired(rs []*RetiredObject) []meta.RetiredObject {
	if len(rs) == 0 {
		return nil
	}
	out := make([]meta.RetiredObject, len(rs))
	for i, r := range rs {
		out[i] = meta.RetiredObject{Key: r.GetKey(), RetiredMs: r.GetRetiredMs()}
	}
	return out
}

// FromChunkStatus converts a CommitResult's chunk statuses (nil stays nil).
func FromChunkStatus(ss []meta.ChunkStatus) []ChunkStatus {
	if len(ss) == 0 {
		return nil
	}
	out := make([]ChunkStatus, len(ss))
	for i, s := range ss {
		out[i] = ChunkStatus(s)
	}
	return out
}

// ToChunkStatus converts wire chunk statuses. A value out of meta.ChunkStatus's range (a
// newer sequencer's refusal) stays a refusal: it maps to the largest status, which
// meta.ChunkStatus.Err reports as an unknown refusal.
func ToChunkStatus(ss []ChunkStatus) []meta.ChunkStatus {
	if len(ss) == 0 {
		return nil
	}
	out := make([]meta.ChunkStatus, len(ss))
	for i, s := range ss {
		if s < 0 || s > 255 {
			s = 255
		}
		out[i] = meta.ChunkStatus(s)
	}
	return out
}

// FromCommitResult converts a CommitResult into its response.
func FromCommitResult(r meta.CommitResult) *CommitWalResponse {
	return &CommitWalResponse{BaseOffsets: r.BaseOffsets, Duplicate: r.Duplicate, AppliedIndex: r.AppliedIndex,
		ChunkStatus: FromChunkStatus(r.Status)}
}

// ToCommitResult converts a CommitWal response.
func ToCommitResult(r *CommitWalResponse) meta.CommitResult {
	return meta.CommitResult{BaseOffsets: r.GetBaseOffsets(), Duplicate: r.GetDuplicate(), AppliedIndex: r.GetAppliedIndex(),
		Status: ToChunkStatus(r.GetChunkStatus())}
}

// FromCommitWal converts a CommitWal into its request (PerChunk unless AllOrNothing).
func FromCommitWal(c meta.CommitWal) *CommitWalRequest {
	return &CommitWalRequest{NodeId: c.NodeID, Object: c.Object, Class: c.Class, CreatedMs: c.CreatedMs,
		StampMs: c.StampMs, Chunks: FromChunks(c.Chunks), PerChunk: !c.AllOrNothing}
}

// ToCommitWal converts a CommitWal request. A request without per_chunk (a client that
// predates per-chunk answers) asks for all or nothing.
func ToCommitWal(r *CommitWalRequest) meta.CommitWal {
	return meta.CommitWal{NodeID: r.GetNodeId(), Object: r.GetObject(), Class: r.GetClass(), CreatedMs: r.GetCreatedMs(),
		StampMs: r.GetStampMs(), Chunks: ToChunks(r.GetChunks()), AllOrNothing: !r.GetPerChunk()}
}

// Epoch16 converts a wire epoch (an int32 field) to Kafka's int16, mapping a value out of
// int16's range to -1 (no epoch), which the sequencer refuses.
func Epoch16(v int32) int16 {
	if v < math.MinInt16 || v > math.MaxInt16 {
		return -1
	}
	return int16(v)
}
