package etcdmembers

import (
	"context"
	"fmt"
	"strings"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// CaughtUp reports whether the member named name answers without alarms,
// knows a leader, and has applied every entry its leader had committed
// when asked just before; when not, why says what it waits for. Polled
// after a member (re)started, it is the wait of a change of one member at
// a time: go on to the next only once the last is healthy and caught up.
func CaughtUp(ctx context.Context, c Client, name string) (ok bool, why string) {
	list, err := c.MemberList(ctx)
	if err != nil {
		return false, "etcd member list: " + err.Error()
	}
	m := ByName(list.Members, name)
	if m == nil {
		return false, "no etcd member " + name
	}
	st, why := status(ctx, c, m)
	if st == nil {
		return false, why
	}
	if st.Leader == 0 {
		return false, name + " has no leader"
	}
	if st.Leader == m.ID {
		return true, ""
	}
	var leader *etcdserverpb.Member
	for _, l := range list.Members {
		if l.ID == st.Leader {
			leader = l
		}
	}
	if leader == nil {
		return false, fmt.Sprintf("the leader of %s (%x) is not in the member list yet", name, st.Leader)
	}
	lst, why := status(ctx, c, leader)
	if lst == nil {
		return false, why
	}
	// Asked after the leader: entries committed by then must be applied.
	if st, why = status(ctx, c, m); st == nil {
		return false, why
	}
	if st.RaftAppliedIndex < lst.RaftIndex {
		return false, fmt.Sprintf("%s has applied %d of the %d entries %s committed", name, st.RaftAppliedIndex, lst.RaftIndex, nameOf(leader))
	}
	return true, ""
}

// status is m's answer, or nil and why there is none (or why it is not
// healthy: an alarm it raised).
func status(ctx context.Context, c Client, m *etcdserverpb.Member) (*clientv3.StatusResponse, string) {
	h := Check(ctx, c, []*etcdserverpb.Member{m})[0]
	if h.Err != nil {
		return nil, nameOf(m) + " does not answer: " + h.Err.Error()
	}
	if len(h.Status.Errors) > 0 {
		return nil, nameOf(m) + ": " + strings.Join(h.Status.Errors, "; ")
	}
	return h.Status, ""
}
