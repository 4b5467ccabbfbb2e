package group

import (
	"cmp"
	"slices"
)

// Server-side assignors of KIP-848 groups.
//
//   - uniform (Kafka's default, UniformAssignor): every partition of every subscribed topic
//     goes to one member subscribed to its topic; members keep what they had where that
//     keeps the assignment balanced, new and freed partitions go to the members with the
//     fewest, and partitions move from the fullest to the emptiest eligible member until no
//     two eligible members differ by more than one.
//   - range (RangeAssignor): per topic, its subscribers in member-id order get contiguous
//     ranges, the first (partitions mod members) one partition more.
//
// Both are deterministic: the same members, subscriptions, topics and previous assignment
// give the same result.

// assignment is topic → sorted partitions.
type assignment map[string][]int32

func (a assignment) count() int {
	n := 0
	for _, ps := range a {
		n += len(ps)
	}
	return n
}

func (a assignment) has(topic string, p int32) bool {
	return slices.Contains(a[topic], p)
}

func (a assignment) clone() assignment {
	out := make(assignment, len(a))
	for t, ps := range a {
		out[t] = slices.Clone(ps)
	}
	return out
}

func (a assignment) equal(b assignment) bool {
	if a.count() != b.count() {
		return false
	}
	for t, ps := range a {
		if !slices.Equal(ps, b[t]) {
			return false
		}
	}
	return true
}

func (a assignment) add(topic string, p int32) {
	ps := a[topic]
	i, found := slices.BinarySearch(ps, p)
	if !found {
		a[topic] = slices.Insert(ps, i, p)
	}
}

func (a assignment) del(topic string, p int32) {
	ps := a[topic]
	if i, found := slices.BinarySearch(ps, p); found {
		ps = slices.Delete(ps, i, i+1)
		if len(ps) == 0 {
			delete(a, topic)
		} else {
			a[topic] = ps
		}
	}
}

// assignInput is what an assignor sees: members in id order with their subscribed topics,
// partition counts per topic, and the previous target per member.
type assignInput struct {
	members []string
	subs    map[string]map[string]bool // member → topics
	parts   map[string]int32           // topic → partitions
	prev    map[string]assignment      // member → previous target
}

type tp struct {
	topic string
	p     int32
}

func assignUniform(in assignInput) map[string]assignment {
	out := make(map[string]assignment, len(in.members))
	for _, m := range in.members {
		out[m] = assignment{}
	}
	if len(in.members) == 0 {
		return out
	}
	owner := map[tp]string{}
	// Keep what members had, when still valid.
	for _, m := range in.members {
		for t, ps := range in.prev[m] {
			if !in.subs[m][t] {
				continue
			}
			for _, p := range ps {
				k := tp{t, p}
				if p < in.parts[t] && owner[k] == "" {
					owner[k] = m
					out[m].add(t, p)
				}
			}
		}
	}
	eligible := func(t string) []string {
		var es []string
		for _, m := range in.members {
			if in.subs[m][t] {
				es = append(es, m)
			}
		}
		return es
	}
	topics := sortedKeys(in.parts)
	// Hand out the unowned partitions to the eligible members with the fewest.
	for _, t := range topics {
		es := eligible(t)
		if len(es) == 0 {
			continue
		}
		for p := range in.parts[t] {
			if owner[tp{t, p}] != "" {
				continue
			}
			best := slices.MinFunc(es, func(a, b string) int {
				return cmp.Or(cmp.Compare(out[a].count(), out[b].count()), cmp.Compare(a, b))
			})
			owner[tp{t, p}] = best
			out[best].add(t, p)
		}
	}
	// Balance: move a partition from the fullest member to an eligible emptier one while
	// they differ by more than one.
	total := 0
	for _, n := range in.parts {
		total += int(n)
	}
	for range total + 1 {
		moved := false
		order := slices.Clone(in.members)
		slices.SortStableFunc(order, func(a, b string) int { return cmp.Compare(out[b].count(), out[a].count()) })
		for _, from := range order {
			for _, t := range sortedKeys(out[from]) {
				ps := out[from][t]
				if len(ps) == 0 {
					continue
				}
				p := ps[len(ps)-1]
				var to string
				for _, m := range eligible(t) {
					if out[m].count()+1 < out[from].count() && (to == "" || out[m].count() < out[to].count()) {
						to = m
					}
				}
				if to != "" {
					out[from].del(t, p)
					out[to].add(t, p)
					moved = true
					break
				}
			}
			if moved {
				break
			}
		}
		if !moved {
			break
		}
	}
	return out
}

func assignRange(in assignInput) map[string]assignment {
	out := make(map[string]assignment, len(in.members))
	for _, m := range in.members {
		out[m] = assignment{}
	}
	for _, t := range sortedKeys(in.parts) {
		var es []string
		for _, m := range in.members {
			if in.subs[m][t] {
				es = append(es, m)
			}
		}
		if len(es) == 0 {
			continue
		}
		n := in.parts[t]
		per, extra := n/int32(len(es)), n%int32(len(es))
		next := int32(0)
		for i, m := range es {
			k := per
			if int32(i) < extra {
				k++
			}
			for p := next; p < next+k; p++ {
				out[m].add(t, p)
			}
			next += k
		}
	}
	return out
}
