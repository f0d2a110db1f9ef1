package etcdmembers

import (
	"context"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// LeaderMover is the part of an etcd client that hands leadership over;
// *clientv3.Client has it.
type LeaderMover interface {
	Status(ctx context.Context, endpoint string) (*clientv3.StatusResponse, error)
	MoveLeader(ctx context.Context, transfereeID uint64) (*clientv3.MoveLeaderResponse, error)
}

// MoveLeader asks the member at endpoint, when it leads, to hand its
// leadership to the member with ID to; it reports whether it did. etcd
// takes the request only from its leader, so c must talk to endpoint.
// Stopping or removing a leading member costs an election (seconds on a
// loaded host) in which nothing can be written; handing leadership over
// first does not.
func MoveLeader(ctx context.Context, c LeaderMover, endpoint string, to uint64) (bool, error) {
	st, err := c.Status(ctx, endpoint)
	if err != nil {
		return false, err
	}
	if st.Header == nil || st.Leader != st.Header.MemberId {
		return false, nil
	}
	if _, err := c.MoveLeader(ctx, to); err != nil {
		return false, err
	}
	return true, nil
}

// Transferee is the voting member other than from with the lowest ID, or
// nil: the one MoveLeader hands leadership to.
func Transferee(members []*etcdserverpb.Member, from uint64) *etcdserverpb.Member {
	var to *etcdserverpb.Member
	for _, m := range members {
		if m.ID != from && !m.IsLearner && (to == nil || m.ID < to.ID) {
			to = m
		}
	}
	return to
}
