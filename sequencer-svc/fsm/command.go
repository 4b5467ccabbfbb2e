package fsm

import (
	"fmt"

	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/meta/metapb"
	"google.golang.org/protobuf/proto"
)

// Command builders. The proposer sets Command.StampMs and encodes with Encode.

// CreateNamespace is the command that creates namespace name.
func CreateNamespace(name string) *metapb.Command {
	return &metapb.Command{Op: &metapb.Command_CreateNamespace{CreateNamespace: &metapb.CreateNamespaceCmd{Name: name}}}
}

// CreateStream is the command that creates a stream.
func CreateStream(c meta.StreamConfig) *metapb.Command {
	return &metapb.Command{Op: &metapb.Command_CreateStream{CreateStream: metapb.FromStreamConfig(c)}}
}

// UpdateStream is the command that patches a stream.
func UpdateStream(ns, name string, p meta.StreamPatch) *metapb.Command {
	return &metapb.Command{Op: &metapb.Command_UpdateStream{UpdateStream: &metapb.UpdateStreamCmd{
		Namespace: ns, Name: name, Patch: metapb.FromStreamPatch(p)}}}
}

// DeleteStream is the command that deletes a stream.
func DeleteStream(ns, name string) *metapb.Command {
	return &metapb.Command{Op: &metapb.Command_DeleteStream{DeleteStream: &metapb.DeleteStreamCmd{Namespace: ns, Name: name}}}
}

// RegisterNode is the command that records voter id's RPC address.
func RegisterNode(id, rpcAddr string) *metapb.Command {
	return &metapb.Command{Op: &metapb.Command_RegisterNode{RegisterNode: &metapb.RegisterNodeCmd{Id: id, RpcAddr: rpcAddr}}}
}

// CommitWal is the command that commits a WAL object, its chunks column- and delta-encoded
// (see metapb.CommitWalCmd), refused per chunk unless c.AllOrNothing. c.StampMs is not
// carried: the leader's stamp is.
func CommitWal(c meta.CommitWal) *metapb.Command {
	return &metapb.Command{Op: &metapb.Command_CommitWal{CommitWal: commitWalCmd(c)}}
}

func commitWalCmd(c meta.CommitWal) *metapb.CommitWalCmd {
	n := len(c.Chunks)
	w := &metapb.CommitWalCmd{
		Object: c.Object, NodeId: c.NodeID, Class: c.Class, CreatedMs: c.CreatedMs, PerChunk: !c.AllOrNothing,
		StreamDelta: make([]int64, n), PartitionDelta: make([]int32, n), Records: make([]int64, n),
		OffsetGap: make([]int64, n), Length: make([]int64, n), MaxTsDelta: make([]int64, n),
	}
	var prevStream uint64
	var prevPart int32
	var prevEnd int64
	for i, ch := range c.Chunks {
		w.StreamDelta[i] = int64(ch.StreamID - prevStream)
		if ch.StreamID == prevStream {
			w.PartitionDelta[i] = ch.Partition - prevPart
		} else {
			w.PartitionDelta[i] = ch.Partition
		}
		w.Records[i] = ch.Records
		w.OffsetGap[i] = ch.Offset - prevEnd
		w.Length[i] = ch.Length
		w.MaxTsDelta[i] = ch.MaxTimestamp - c.CreatedMs
		prevStream, prevPart, prevEnd = ch.StreamID, ch.Partition, ch.Offset+ch.Length
		if ch.Producer.Has() && w.ProducerId == nil {
			w.ProducerId, w.ProducerEpoch, w.BaseSequence = make([]int64, n), make([]int32, n), make([]int32, n)
		}
	}
	if w.ProducerId != nil {
		for i, ch := range c.Chunks {
			if ch.Producer.Has() {
				w.ProducerId[i], w.ProducerEpoch[i], w.BaseSequence[i] = ch.Producer.ID, int32(ch.Producer.Epoch), ch.Producer.BaseSequence
			}
		}
	}
	return w
}

// CommitWalBatch is the command that commits several WAL objects in one Raft entry, each
// as its own CommitWal.
func CommitWalBatch(cs []meta.CommitWal) *metapb.Command {
	b := &metapb.CommitWalBatchCmd{Commits: make([]*metapb.CommitWalCmd, len(cs))}
	for i, c := range cs {
		b.Commits[i] = commitWalCmd(c)
	}
	return &metapb.Command{Op: &metapb.Command_CommitWalBatch{CommitWalBatch: b}}
}

// DecodeCommitWal expands a CommitWalCmd into a CommitWal (StampMs left zero). Columns of
// different lengths are ErrInvalidArgument.
func DecodeCommitWal(w *metapb.CommitWalCmd) (meta.CommitWal, error) {
	return decodeCommitWalInto(w, nil)
}

// decodeCommitWalInto is DecodeCommitWal with the chunks in buf's array when it is large
// enough.
func decodeCommitWalInto(w *metapb.CommitWalCmd, buf []meta.Chunk) (meta.CommitWal, error) {
	c := meta.CommitWal{Object: w.GetObject(), NodeID: w.GetNodeId(), Class: w.GetClass(), CreatedMs: w.GetCreatedMs(),
		AllOrNothing: !w.GetPerChunk()}
	n := len(w.GetStreamDelta())
	if len(w.GetPartitionDelta()) != n || len(w.GetRecords()) != n || len(w.GetOffsetGap()) != n ||
		len(w.GetLength()) != n || len(w.GetMaxTsDelta()) != n {
		return c, fmt.Errorf("%w: commit wal %s: chunk columns of different lengths", meta.ErrInvalidArgument, c.Object)
	}
	producers := len(w.GetProducerId()) > 0
	if producers && (len(w.GetProducerId()) != n || len(w.GetProducerEpoch()) != n || len(w.GetBaseSequence()) != n) {
		return c, fmt.Errorf("%w: commit wal %s: producer columns of %d, %d and %d values for %d chunks", meta.ErrInvalidArgument,
			c.Object, len(w.GetProducerId()), len(w.GetProducerEpoch()), len(w.GetBaseSequence()), n)
	}
	if cap(buf) >= n {
		c.Chunks = buf[:n]
	} else {
		c.Chunks = make([]meta.Chunk, n)
	}
	var prevStream uint64
	var prevPart int32
	var prevEnd int64
	for i := range n {
		ch := meta.Chunk{StreamID: prevStream + uint64(w.StreamDelta[i])}
		if ch.StreamID == prevStream {
			ch.Partition = prevPart + w.PartitionDelta[i]
		} else {
			ch.Partition = w.PartitionDelta[i]
		}
		ch.Records = w.Records[i]
		ch.Offset = prevEnd + w.OffsetGap[i]
		ch.Length = w.Length[i]
		ch.MaxTimestamp = c.CreatedMs + w.MaxTsDelta[i]
		if producers && w.ProducerId[i] > 0 {
			ch.Producer = meta.ChunkProducer{ID: w.ProducerId[i], Epoch: metapb.Epoch16(w.ProducerEpoch[i]), BaseSequence: w.BaseSequence[i]}
		}
		c.Chunks[i] = ch
		prevStream, prevPart, prevEnd = ch.StreamID, ch.Partition, ch.Offset+ch.Length
	}
	return c, nil
}

// Encode marshals a command into Raft log entry bytes.
func Encode(cmd *metapb.Command) ([]byte, error) {
	b, err := proto.Marshal(cmd)
	if err != nil {
		return nil, fmt.Errorf("fsm: encode command: %w", err)
	}
	return b, nil
}

// Decode unmarshals Raft log entry bytes; malformed bytes are an error, never a panic.
func Decode(b []byte) (*metapb.Command, error) {
	cmd := &metapb.Command{}
	if err := proto.Unmarshal(b, cmd); err != nil {
		return nil, fmt.Errorf("%w: decode command: %v", ErrBadCommand, err)
	}
	return cmd, nil
}
