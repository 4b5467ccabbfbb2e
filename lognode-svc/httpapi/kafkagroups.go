package httpapi

// Kafka consumer groups over HTTP, read only (docs/kafka-groups.md):
//
//	GET /v1/namespaces/{ns}/kafka-groups          -> {"groups": [...]}
//	GET /v1/namespaces/{ns}/kafka-groups/{group}  -> generation, committed offsets, lag
//
// The state lives in the sequencer (meta.Client's Kafka group methods); Kafka clients
// join and commit through the Kafka gateway.

import (
	"errors"
	"net/http"

	"github.com/loamhq/loam/lognode-svc/kafka/group"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/streamapi"
)

func (s *Server) routeKafkaGroups() {
	const groups = "/v1/namespaces/{ns}/kafka-groups"
	s.handle("GET "+groups, s.listKafkaGroups)
	s.handle("GET "+groups+"/{group}", s.describeKafkaGroup)
	for _, p := range []string{groups, groups + "/{group}"} {
		s.mux.HandleFunc(p, func(w http.ResponseWriter, r *http.Request) {
			writeError(w, http.StatusMethodNotAllowed, streamapi.CodeMethodNotAllowed, r.Method+" is not allowed on "+r.URL.Path)
		})
	}
}

func (s *Server) listKafkaGroups(w http.ResponseWriter, r *http.Request) error {
	gs, err := s.cfg.Meta.ListKafkaGroups(r.Context(), r.PathValue("ns"))
	if err != nil {
		return err
	}
	out := streamapi.KafkaGroupList{Groups: make([]streamapi.KafkaGroupSummary, 0, len(gs))}
	for _, g := range gs {
		out.Groups = append(out.Groups, streamapi.KafkaGroupSummary{Group: g.Group, Generation: g.Generation, ProtocolType: g.ProtocolType, UpdatedMs: g.UpdatedMs})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) describeKafkaGroup(w http.ResponseWriter, r *http.Request) error {
	st, lags, err := group.Lag(r.Context(), s.cfg.Meta, r.PathValue("ns"), r.PathValue("group"))
	if errors.Is(err, meta.ErrKafkaGroupNotFound) {
		return badInput(http.StatusNotFound, streamapi.CodeKafkaGroupNotFound, "%s", err.Error())
	}
	if err != nil {
		return err
	}
	d := streamapi.KafkaGroupDescription{Group: st.Group, Generation: st.Generation, Epoch: st.Epoch, ProtocolType: st.ProtocolType,
		CreatedMs: st.CreatedMs, UpdatedMs: st.UpdatedMs, Partitions: make([]streamapi.KafkaGroupPartition, 0, len(lags))}
	for _, l := range lags {
		d.Partitions = append(d.Partitions, streamapi.KafkaGroupPartition{Topic: l.Topic, Partition: l.Partition, Committed: l.Committed,
			HighWatermark: l.HighWatermark, Lag: l.Lag, Metadata: l.Metadata, CommittedMs: l.CommittedMs})
	}
	writeJSON(w, http.StatusOK, d)
	return nil
}
