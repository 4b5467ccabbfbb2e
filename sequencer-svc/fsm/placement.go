package fsm

import (
	"encoding/binary"
	"fmt"
	"slices"

	bolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/proto"

	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/meta/metapb"
)

// Quorum placement (meta/placement.go). The bucket "journals" maps a journal id to its
// Journal message (protobuf, deterministic encoding); "journal_parts" maps a partition of
// a quorum stream, stream id (u64) then partition (u32), big-endian, to the id of the
// journal that holds it. Both are created by the first journal, so databases without them
// read as "no journals" and the format is unchanged. Bound: MaxJournals journals of
// MaxJournalMembers members; one assignment per partition of a quorum stream.
//
// Placement is deterministic, so every voter places alike: a quorum stream's partitions go
// to one journal, the least loaded (fewest partitions; the smallest id on a tie) when the
// stream is created (with a leader zone hint: the least loaded with a member in that zone,
// if any), and partitions added later join the journal of its partition 0. A
// stream created while there is no journal is placed when the first journal is created;
// a deleted stream's assignments go with it.
//
// Moves (meta.JournalMove): the bucket "journal_moves", created by the first move and keyed
// like "journal_parts", holds each move in progress (protobuf JournalMove). A move is
// requested by AssignJournalPartitions naming another journal than the owner, sealed by
// SealJournalMove (the partition's index high watermark must be the end the old journal
// reports), and completed by CompleteJournalMove, which flips the owner and deletes the
// record. Bound: one record per partition moving, each at most MaxMoveProducers producer
// states (about 60 bytes each).
var (
	bJournals     = []byte("journals")
	bJournalParts = []byte("journal_parts")
	bJournalMoves = []byte("journal_moves")
)

// CreateJournal is the command that records a new journal.
func CreateJournal(j meta.Journal) *metapb.Command {
	return placementCmd(&metapb.PlacementCmd{Op: &metapb.PlacementCmd_CreateJournal{CreateJournal: &metapb.CreateJournalRequest{
		Journal: &metapb.Journal{Id: j.ID, Members: metapb.FromJournalMembers(j.Members)}}}})
}

// SetJournalMembers is the command that replaces a journal's members at epoch.
func SetJournalMembers(id string, epoch uint64, members []meta.JournalMember) *metapb.Command {
	return placementCmd(&metapb.PlacementCmd{Op: &metapb.PlacementCmd_SetMembers{SetMembers: &metapb.SetJournalMembersRequest{
		Id: id, Epoch: epoch, Members: metapb.FromJournalMembers(members)}}})
}

// AssignJournalPartitions is the command that makes journal the owner of partitions.
func AssignJournalPartitions(streamID uint64, partitions []int32, journal string) *metapb.Command {
	return placementCmd(&metapb.PlacementCmd{Op: &metapb.PlacementCmd_Assign{Assign: &metapb.AssignJournalPartitionsRequest{
		StreamId: streamID, Partitions: partitions, Journal: journal}}})
}

// SealJournalMove is the command that records a move's seal (meta.Client.SealJournalMove).
func SealJournalMove(m meta.JournalMove) *metapb.Command {
	return placementCmd(&metapb.PlacementCmd{Op: &metapb.PlacementCmd_SealMove{SealMove: &metapb.SealJournalMoveRequest{Move: metapb.FromJournalMove(m)}}})
}

// CompleteJournalMove is the command that completes a sealed move.
func CompleteJournalMove(streamID uint64, partition int32, journal string, end int64) *metapb.Command {
	return placementCmd(&metapb.PlacementCmd{Op: &metapb.PlacementCmd_CompleteMove{CompleteMove: &metapb.CompleteJournalMoveRequest{
		StreamId: streamID, Partition: partition, Journal: journal, End: end}}})
}

func placementCmd(c *metapb.PlacementCmd) *metapb.Command {
	return &metapb.Command{Op: &metapb.Command_Placement{Placement: c}}
}

// applyPlacement applies a placement command; changed reports whether it changed the
// state (a repeat does not).
func (a *applier) applyPlacement(c *metapb.PlacementCmd) (j meta.Journal, changed bool, err error) {
	switch op := c.GetOp().(type) {
	case *metapb.PlacementCmd_CreateJournal:
		return a.createJournal(metapb.ToJournal(op.CreateJournal.GetJournal()))
	case *metapb.PlacementCmd_SetMembers:
		s := op.SetMembers
		return a.setJournalMembers(s.GetId(), s.GetEpoch(), metapb.ToJournalMembers(s.GetMembers()))
	case *metapb.PlacementCmd_Assign:
		s := op.Assign
		changed, err := a.assignJournalParts(s.GetStreamId(), s.GetPartitions(), s.GetJournal())
		return meta.Journal{}, changed, err
	case *metapb.PlacementCmd_SealMove:
		changed, err := a.sealJournalMove(metapb.ToJournalMove(op.SealMove.GetMove()))
		return meta.Journal{}, changed, err
	case *metapb.PlacementCmd_CompleteMove:
		s := op.CompleteMove
		changed, err := a.completeJournalMove(s.GetStreamId(), s.GetPartition(), s.GetJournal(), s.GetEnd())
		return meta.Journal{}, changed, err
	}
	return meta.Journal{}, false, fmt.Errorf("%w: unknown placement operation", ErrBadCommand)
}

func (a *applier) createJournal(j meta.Journal) (meta.Journal, bool, error) {
	if err := meta.CheckJournalID(j.ID); err != nil {
		return meta.Journal{}, false, fmt.Errorf("create journal: %w", err)
	}
	if err := meta.CheckJournalMembers(j.Members); err != nil {
		return meta.Journal{}, false, fmt.Errorf("create journal %s: %w", j.ID, err)
	}
	b, err := a.tx.CreateBucketIfNotExists(bJournals)
	if err != nil {
		a.check(err)
		return meta.Journal{}, false, err
	}
	if old, ok := getJournal(b, j.ID); ok {
		if !slices.Equal(old.Members, j.Members) {
			return meta.Journal{}, false, fmt.Errorf("%w: create journal %s: it exists with other members", meta.ErrInvalidArgument, j.ID)
		}
		return old, false, nil // a retry
	}
	if n := countKeys(b); n >= meta.MaxJournals {
		return meta.Journal{}, false, fmt.Errorf("%w: create journal %s: %d journals already, at most %d", meta.ErrInvalidArgument, j.ID, n, meta.MaxJournals)
	}
	j = meta.Journal{ID: j.ID, Members: j.Members, Epoch: 1, CreatedMs: a.clock, UpdatedMs: a.clock}
	a.check(putJournal(b, j))
	a.placeUnplaced()
	return j, true, nil
}

func (a *applier) setJournalMembers(id string, epoch uint64, ms []meta.JournalMember) (meta.Journal, bool, error) {
	if err := meta.CheckJournalMembers(ms); err != nil {
		return meta.Journal{}, false, fmt.Errorf("set the members of journal %s: %w", id, err)
	}
	b := a.tx.Bucket(bJournals)
	var j meta.Journal
	ok := false
	if b != nil {
		j, ok = getJournal(b, id)
	}
	switch {
	case !ok:
		return meta.Journal{}, false, fmt.Errorf("%w: set the members of journal %q: no such journal", meta.ErrInvalidArgument, id)
	case j.Epoch == epoch+1 && slices.Equal(j.Members, ms):
		return j, false, nil // a retry of the change that made this epoch
	case j.Epoch != epoch:
		return meta.Journal{}, false, fmt.Errorf("set the members of journal %s at epoch %d: it is at epoch %d: %w", id, epoch, j.Epoch, meta.ErrJournalEpoch)
	}
	j.Members, j.Epoch, j.UpdatedMs = ms, j.Epoch+1, a.clock
	a.check(putJournal(b, j))
	return j, true, nil
}

func (a *applier) assignJournalParts(streamID uint64, parts []int32, journal string) (bool, error) {
	what := fmt.Sprintf("assign partitions of stream %d to journal %s", streamID, journal)
	if len(parts) == 0 || len(parts) > meta.MaxPartitions {
		return false, fmt.Errorf("%w: %s: %d partitions, want 1 to %d", meta.ErrInvalidArgument, what, len(parts), meta.MaxPartitions)
	}
	st, err := a.quorumStream(streamID, what)
	if err != nil {
		return false, err
	}
	b := a.tx.Bucket(bJournals)
	if b == nil || b.Get([]byte(journal)) == nil {
		return false, fmt.Errorf("%w: %s: no such journal", meta.ErrInvalidArgument, what)
	}
	for _, p := range parts {
		if p < 0 || p >= st.Partitions {
			return false, fmt.Errorf("%s: partition %d of %d: %w", what, p, st.Partitions, meta.ErrPartitionNotFound)
		}
	}
	pb, err := a.tx.CreateBucketIfNotExists(bJournalParts)
	if err != nil {
		a.check(err)
		return false, err
	}
	mb, err := a.tx.CreateBucketIfNotExists(bJournalMoves)
	if err != nil {
		a.check(err)
		return false, err
	}
	// Check every partition before changing any.
	for _, p := range parts {
		k := journalPartKey(streamID, p)
		owner := string(pb.Get(k))
		m, moving := getMove(mb, k)
		switch {
		case !moving:
		case m.To == journal:
		case owner == journal && m.State == meta.MoveRequested:
		case owner == journal:
			return false, fmt.Errorf("%w: %s: partition %d is sealed for its move to %s, which only completes", meta.ErrInvalidArgument, what, p, m.To)
		default:
			return false, fmt.Errorf("%w: %s: partition %d is moving from %s to %s", meta.ErrInvalidArgument, what, p, m.From, m.To)
		}
	}
	changed := false
	for _, p := range parts {
		k := journalPartKey(streamID, p)
		owner := string(pb.Get(k))
		m, moving := getMove(mb, k)
		switch {
		case moving && m.To == journal: // a repeat
		case moving: // owner == journal: a cancellation
			a.check(mb.Delete(k))
			changed = true
		case owner == "" || b.Get([]byte(owner)) == nil:
			a.check(pb.Put(k, []byte(journal)))
			changed = true
		case owner != journal:
			a.check(putMove(mb, k, meta.JournalMove{StreamID: streamID, Partition: p, From: owner, To: journal, State: meta.MoveRequested, CreatedMs: a.clock}))
			changed = true
		}
	}
	return changed, nil
}

// quorumStream is stream id, of class quorum.
func (a *applier) quorumStream(id uint64, what string) (meta.Stream, error) {
	sk := a.tx.Bucket(bStreamIDs).Get(u64(id))
	if sk == nil {
		return meta.Stream{}, fmt.Errorf("%s: %w", what, meta.ErrStreamNotFound)
	}
	st, err := decodeStream(a.tx.Bucket(bStreams).Get(sk))
	if err != nil {
		return meta.Stream{}, err
	}
	if st.Class != meta.ClassQuorum {
		return meta.Stream{}, fmt.Errorf("%w: %s: the stream is of class %s, not quorum", meta.ErrInvalidArgument, what, st.Class)
	}
	return st, nil
}

// sealJournalMove moves a requested move to sealed (meta.Client.SealJournalMove).
func (a *applier) sealJournalMove(m meta.JournalMove) (bool, error) {
	what := fmt.Sprintf("seal the move of stream %d partition %d from %s to %s at %d", m.StreamID, m.Partition, m.From, m.To, m.End)
	if err := meta.CheckProducerCarry(m.Producers); err != nil {
		return false, fmt.Errorf("%s: %w", what, err)
	}
	k := journalPartKey(m.StreamID, m.Partition)
	mb := a.tx.Bucket(bJournalMoves)
	var cur meta.JournalMove
	ok := false
	if mb != nil {
		cur, ok = getMove(mb, k)
	}
	switch {
	case !ok || cur.From != m.From || cur.To != m.To:
		return false, fmt.Errorf("%s: no such move: %w", what, meta.ErrJournalMove)
	case cur.State == meta.MoveSealed && cur.End == m.End:
		return false, nil // a repeat
	case cur.State != meta.MoveRequested:
		return false, fmt.Errorf("%s: the move is %s at %d: %w", what, cur.State, cur.End, meta.ErrJournalMove)
	}
	rec, err := a.partition(m.StreamID, m.Partition)
	if err != nil {
		return false, fmt.Errorf("%s: %w", what, err)
	}
	if hwm := rec.GetHighWatermark(); hwm != m.End {
		return false, fmt.Errorf("%s: the offset index ends at %d: %w", what, hwm, meta.ErrIndexChanged)
	}
	cur.State, cur.End, cur.Producers = meta.MoveSealed, m.End, m.Producers
	a.check(putMove(mb, k, cur))
	// From offloaded everything: its offload lease ends so To takes it over at once.
	lk := leaseKey(m.StreamID, m.Partition, meta.LeaseOffload)
	if lr, ok := a.lease(lk); ok && lr.GetExpiresMs() != 0 {
		lr.ExpiresMs = 0
		a.putLease(lk, lr)
	}
	return true, nil
}

// completeJournalMove flips a sealed move's owner (meta.Client.CompleteJournalMove).
func (a *applier) completeJournalMove(id uint64, p int32, journal string, end int64) (bool, error) {
	what := fmt.Sprintf("complete the move of stream %d partition %d to %s at %d", id, p, journal, end)
	k := journalPartKey(id, p)
	pb, mb := a.tx.Bucket(bJournalParts), a.tx.Bucket(bJournalMoves)
	var cur meta.JournalMove
	ok := false
	if mb != nil {
		cur, ok = getMove(mb, k)
	}
	switch {
	case !ok && pb != nil && string(pb.Get(k)) == journal:
		return false, nil // a repeat
	case !ok || cur.To != journal:
		return false, fmt.Errorf("%s: no such move: %w", what, meta.ErrJournalMove)
	case cur.State != meta.MoveSealed || cur.End != end:
		return false, fmt.Errorf("%s: the move is %s at %d: %w", what, cur.State, cur.End, meta.ErrJournalMove)
	}
	a.check(pb.Put(k, []byte(journal)))
	a.check(mb.Delete(k))
	return true, nil
}

func getMove(b *bolt.Bucket, k []byte) (meta.JournalMove, bool) {
	v := b.Get(k)
	if v == nil {
		return meta.JournalMove{}, false
	}
	var m metapb.JournalMove
	if err := proto.Unmarshal(v, &m); err != nil {
		panic(fmt.Sprintf("fsm: journal move %x: %v", k, err)) // the state is corrupt
	}
	return metapb.ToJournalMove(&m), true
}

func putMove(b *bolt.Bucket, k []byte, m meta.JournalMove) error {
	v, err := proto.MarshalOptions{Deterministic: true}.Marshal(metapb.FromJournalMove(m))
	if err != nil {
		return err
	}
	return b.Put(k, v)
}

// placeStream places partitions [from, to) of quorum stream id (leader zone hint zone)
// that no journal holds: in the journal of its partition 0, else as pickJournal says.
// Without journals it does nothing (the first journal places the stream).
func (a *applier) placeStream(id uint64, zone string, from, to int32) {
	if a.tx.Bucket(bJournals) == nil || from >= to {
		return
	}
	a.placeInto(id, zone, from, to, a.journalLoads())
}

// placeInto places partitions [from, to) of stream id that no journal holds, counting
// them in loads.
func (a *applier) placeInto(id uint64, zone string, from, to int32, loads map[string]int) {
	jb := a.tx.Bucket(bJournals)
	if jb == nil || countKeys(jb) == 0 {
		return
	}
	pb, err := a.tx.CreateBucketIfNotExists(bJournalParts)
	if err != nil {
		a.check(err)
		return
	}
	target := ""
	if v := pb.Get(journalPartKey(id, 0)); v != nil && jb.Get(v) != nil {
		target = string(v)
	}
	if target == "" {
		target = pickJournal(jb, zone, loads)
	}
	for p := from; p < to; p++ {
		k := journalPartKey(id, p)
		if pb.Get(k) == nil {
			a.check(pb.Put(k, []byte(target)))
			loads[target]++
		}
	}
}

// pickJournal is the journal a new stream goes to: the least loaded (fewest partitions,
// the smallest id on a tie); for a stream with a leader zone hint, the least loaded of
// the journals with a member in that zone, or of all when none has one (no journal is
// created for a hint; the log nodes report the hint they cannot follow).
func pickJournal(jb *bolt.Bucket, zone string, loads map[string]int) string {
	target, best := "", -1
	zoned, zbest := "", -1
	c := jb.Cursor()
	for k, _ := c.First(); k != nil; k, _ = c.Next() { // ids in order: the smallest wins a tie
		n := loads[string(k)]
		if best < 0 || n < best {
			target, best = string(k), n
		}
		if zone == "" || zbest >= 0 && n >= zbest {
			continue
		}
		if j, _ := getJournal(jb, string(k)); j.HasZone(zone) {
			zoned, zbest = string(k), n
		}
	}
	if zoned != "" {
		return zoned
	}
	return target
}

// placeUnplaced places every partition of every quorum stream that no journal holds.
func (a *applier) placeUnplaced() {
	loads := a.journalLoads()
	c := a.tx.Bucket(bStreams).Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		st, err := decodeStream(v)
		if err != nil {
			panic(fmt.Sprintf("fsm: stream %q: %v", k, err)) // the state is corrupt
		}
		if st.Class == meta.ClassQuorum {
			a.placeInto(st.ID, st.LeaderZone, 0, st.Partitions, loads)
		}
	}
}

// journalLoads counts the partitions each journal holds.
func (a *applier) journalLoads() map[string]int {
	loads := map[string]int{}
	if pb := a.tx.Bucket(bJournalParts); pb != nil {
		_ = pb.ForEach(func(_, v []byte) error { loads[string(v)]++; return nil })
	}
	return loads
}

// dropJournalParts drops a deleted stream's assignments.
func (a *applier) dropJournalParts(id uint64) {
	if mb := a.tx.Bucket(bJournalMoves); mb != nil {
		a.deletePrefix(mb, u64(id))
	}
	pb := a.tx.Bucket(bJournalParts)
	if pb == nil {
		return
	}
	a.deletePrefix(pb, u64(id))
}

func countKeys(b *bolt.Bucket) int {
	n := 0
	c := b.Cursor()
	for k, _ := c.First(); k != nil; k, _ = c.Next() {
		n++
	}
	return n
}

func journalPartKey(id uint64, p int32) []byte {
	return binary.BigEndian.AppendUint32(u64(id), uint32(p))
}

func getJournal(b *bolt.Bucket, id string) (meta.Journal, bool) {
	v := b.Get([]byte(id))
	if v == nil {
		return meta.Journal{}, false
	}
	var m metapb.Journal
	if err := proto.Unmarshal(v, &m); err != nil {
		panic(fmt.Sprintf("fsm: journal %s: %v", id, err)) // the state is corrupt
	}
	return metapb.ToJournal(&m), true
}

func putJournal(b *bolt.Bucket, j meta.Journal) error {
	v, err := proto.MarshalOptions{Deterministic: true}.Marshal(metapb.FromJournal(j))
	if err != nil {
		return err
	}
	return b.Put([]byte(j.ID), v)
}

// ListJournals answers every journal by id and every assignment by stream and partition.
func (f *FSM) ListJournals() (meta.Placement, error) {
	var out meta.Placement
	err := f.view(func(tx *bolt.Tx) error {
		if b := tx.Bucket(bJournals); b != nil {
			if err := b.ForEach(func(k, _ []byte) error {
				j, _ := getJournal(b, string(k))
				out.Journals = append(out.Journals, j)
				return nil
			}); err != nil {
				return err
			}
		}
		if pb := tx.Bucket(bJournalParts); pb != nil {
			ids, streams := tx.Bucket(bStreamIDs), tx.Bucket(bStreams)
			if err := pb.ForEach(func(k, v []byte) error {
				if len(k) != 12 {
					return fmt.Errorf("fsm: journal assignment key %x: want 12 bytes", k)
				}
				a := meta.JournalAssignment{StreamID: binary.BigEndian.Uint64(k), Partition: int32(binary.BigEndian.Uint32(k[8:])), Journal: string(v)}
				if n := len(out.Assignments); n == 0 || out.Assignments[n-1].StreamID != a.StreamID { // a stream's first: its hint
					if sk := ids.Get(u64(a.StreamID)); sk != nil {
						if st, err := decodeStream(streams.Get(sk)); err == nil && st.LeaderZone != "" {
							out.LeaderZones = append(out.LeaderZones, meta.StreamLeaderZone{StreamID: a.StreamID, Zone: st.LeaderZone})
						}
					}
				}
				out.Assignments = append(out.Assignments, a)
				return nil
			}); err != nil {
				return err
			}
		}
		if mb := tx.Bucket(bJournalMoves); mb != nil {
			return mb.ForEach(func(k, _ []byte) error {
				m, _ := getMove(mb, k)
				out.Moves = append(out.Moves, m)
				return nil
			})
		}
		return nil
	})
	return out, err
}
