// Package group is the Kafka group coordinator of a log node: the classic consumer group
// protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup), KIP-848 consumer groups with
// server-side assignment (ConsumerGroupHeartbeat, ConsumerGroupDescribe), committed offsets
// (OffsetCommit, OffsetFetch, OffsetDelete) and group administration (DescribeGroups,
// ListGroups, DeleteGroups). The Kafka gateway (package kafka) decodes frames, finds the
// coordinator of a group and hands this package the requests of the groups this node
// coordinates, through Handler.
//
// # Basics
//
// One file per API key (08_offset_commit.go, …, 69_consumer_group_describe.go), each
// opening with the versions served, the behaviour and what is ignored. Versions answers
// exactly those versions, for the gateway's ApiVersions.
//
// State: a group's members, subscriptions and assignments live in this node's memory
// only. The sequencer keeps what must survive the node (meta/kafkagroup.go): the group's
// generation, its fencing epoch and its committed offsets. The first request that needs a
// group's epoch (a join, a heartbeat of KIP-848, a commit, a deletion) claims the group
// (meta.Client.AdvanceKafkaGroup with epoch 0): its generation moves on from the one the
// sequencer kept, and the previous coordinator, if any, is fenced. Every generation change
// (a completed rebalance, a KIP-848 group epoch bump) advances from the epoch held, and
// every commit names it, so a coordinator that lost the group is refused; it then drops
// the group and answers NOT_COORDINATOR, and clients look the coordinator up again. A node
// restart loses the members: they rejoin (UNKNOWN_MEMBER_ID), as after a broker failover.
//
// Classic groups follow Kafka's state machine: Empty → PreparingRebalance (a member joins
// or leaves, a session expires) → CompletingRebalance (every known member joined, or the
// rebalance timeout passed: the generation advances and the leader gets the members) →
// Stable (the leader's SyncGroup stored the assignments) and back; Dead once deleted.
// Members must send a known member id from JoinGroup v4 on (MEMBER_ID_REQUIRED);
// group.instance.id makes a member static: it keeps its assignment across restarts
// shorter than its session, and an older incarnation is fenced (FENCED_INSTANCE_ID).
//
// KIP-848 groups: the coordinator computes each member's target assignment with the
// member's server assignor ("uniform", the default, sticky and balanced; or "range",
// contiguous ranges per topic, both as Kafka's) whenever the group epoch moves (a member
// joins, leaves or changes its subscription, a subscribed topic gains partitions). A member
// first revokes what its target no longer holds (its epoch stays), then moves to the group
// epoch and receives the partitions of its target that no other member still holds.
//
// # Bounds
//
// Memory is bounded by Config: at most MaxGroups groups in memory (an empty group is
// evicted to make room; past the cap, new groups are answered COORDINATOR_NOT_AVAILABLE),
// at most MaxMembers members per group (pending MEMBER_ID_REQUIRED joins included;
// GROUP_MAX_SIZE_REACHED past it), and per member at most MaxMemberBytes of protocol
// metadata and assignment (INVALID_REQUEST past it). So a node holds at most about
// MaxGroups × MaxMembers × MaxMemberBytes of group state (defaults 10000, 1000, 64 KiB are
// a cap, not an expectation: a group of a few members with a few hundred partitions holds a
// few KiB).
//
// # Caveats
//
// Transactions (TxnOffsetCommit) are not served. OffsetCommit and OffsetFetch v10 (topic
// ids) are not served. Rack-aware assignment is not done: RackID is recorded and shown.
// Offsets are kept until the group is deleted (DeleteGroups) or they are deleted
// (OffsetDelete); offsets.retention.minutes does not apply.
//
// Lock order: Coordinator.mu, then a group's mu; no lock is held while waiting for a
// JoinGroup or SyncGroup answer. A group's mu is held across its sequencer calls (claim,
// advance, commit), which serialises them per group.
package group
