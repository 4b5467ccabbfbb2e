package kafka

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/loamhq/loam/lognode-svc/kafka/group"
	"github.com/loamhq/loam/shared/meta"
)

// Metadata: versions 1-12.
//
// Behaviour: the brokers are the live log nodes of the client's zone (brokers.go), or the
// advertised listener alone; every partition's leader is one of them (the only replica
// and in-sync replica), spread by partition, and the controller is this node. Topics
// nil (v1+) lists every stream of the namespace; a topic that does not exist answers
// UNKNOWN_TOPIC_OR_PARTITION (topics are never created by Metadata); a topic asked for by
// id alone answers UNKNOWN_TOPIC_ID. Leader epochs are -1: there are no leaders to fence.
// Kafka's internal __consumer_offsets is listed too, as internal and empty (group.OffsetsTopic).
//
// Ignored: AllowAutoTopicCreation (create topics with CreateTopics),
// IncludeClusterAuthorizedOperations and IncludeTopicAuthorizedOperations (answered -2147483648, "not asked").
const (
	metadataMin = 1
	metadataMax = 12
)

func (c *conn) metadata(ctx context.Context, r request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.MetadataRequest)
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	bs := c.s.brokers(ctx, zoneOf(r.clientID))
	for _, b := range bs {
		mb := kmsg.NewMetadataResponseBroker()
		mb.NodeID, mb.Host, mb.Port, mb.Rack = b.id, b.host, b.port, b.rack
		resp.Brokers = append(resp.Brokers, mb)
	}
	cid := ClusterID
	resp.ClusterID = &cid
	resp.ControllerID = bs[0].id
	if c.s.cfg.Advertised == "" {
		resp.ControllerID = c.s.selfBroker().id
		if !hasBroker(bs, resp.ControllerID) {
			resp.ControllerID = bs[0].id
		}
	}
	var streams []meta.Stream
	if req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0) {
		list, err := c.s.cfg.Meta.ListStreams(ctx, c.ns)
		if err != nil && !errors.Is(err, meta.ErrNamespaceNotFound) {
			return nil, closeConn("metadata: list topics: %v", err)
		}
		streams = list
		for _, st := range streams {
			if _, internal := group.InternalStream(c.ns, st.Name); !internal {
				resp.Topics = append(resp.Topics, c.topicMetadata(st, bs, 0))
			}
		}
		st, _ := group.InternalStream(c.ns, group.OffsetsTopic)
		resp.Topics = append(resp.Topics, c.topicMetadata(st, bs, 0))
		return resp, nil
	}
	for _, t := range req.Topics {
		if t.Topic == nil {
			mt := kmsg.NewMetadataResponseTopic()
			mt.TopicID, mt.ErrorCode = t.TopicID, kerr.UnknownTopicID.Code
			resp.Topics = append(resp.Topics, mt)
			continue
		}
		if st, internal := group.InternalStream(c.ns, *t.Topic); internal {
			resp.Topics = append(resp.Topics, c.topicMetadata(st, bs, 0))
			continue
		}
		st, err := c.s.cfg.Streams.Stream(ctx, c.ns, *t.Topic)
		if err != nil {
			mt := kmsg.NewMetadataResponseTopic()
			name := *t.Topic
			mt.Topic, mt.ErrorCode = &name, code(err)
			if mt.ErrorCode == kerr.UnknownServerError.Code || mt.ErrorCode == kerr.RequestTimedOut.Code {
				mt.ErrorCode = kerr.LeaderNotAvailable.Code // retriable: the catalog could not answer
			}
			if !validTopic(name) {
				mt.ErrorCode = kerr.InvalidTopicException.Code
			}
			resp.Topics = append(resp.Topics, mt)
			continue
		}
		resp.Topics = append(resp.Topics, c.topicMetadata(st, bs, 0))
	}
	return resp, nil
}

func hasBroker(bs []broker, id int32) bool {
	for _, b := range bs {
		if b.id == id {
			return true
		}
	}
	return false
}

func (c *conn) topicMetadata(st meta.Stream, bs []broker, errCode int16) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	name := st.Name
	mt.Topic, mt.ErrorCode, mt.TopicID = &name, errCode, topicID(st.Namespace, st.ID)
	_, mt.IsInternal = group.InternalStream(st.Namespace, st.Name)
	mt.Partitions = make([]kmsg.MetadataResponseTopicPartition, st.Partitions)
	for p := range st.Partitions {
		mp := &mt.Partitions[p]
		*mp = kmsg.NewMetadataResponseTopicPartition()
		l := leaderOf(bs, st.Name, p)
		mp.Partition, mp.Leader, mp.LeaderEpoch = p, l.id, -1
		mp.Replicas, mp.ISR = []int32{l.id}, []int32{l.id}
	}
	return mt
}

// validTopic reports whether name is a legal Kafka topic name: 1-249 of [a-zA-Z0-9._-],
// neither "." nor "..".
func validTopic(name string) bool {
	if name == "" || len(name) > meta.MaxNameLength || name == "." || name == ".." {
		return false
	}
	for i := 0; i < len(name); i++ {
		ch := name[i]
		if !(ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' || ch == '.' || ch == '_' || ch == '-') {
			return false
		}
	}
	return true
}
