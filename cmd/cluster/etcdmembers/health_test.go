package etcdmembers

import (
	"context"
	"testing"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestCaughtUp checks when a member counts as healthy and caught up:
// it answers without alarms, knows its leader, and has applied what the
// leader committed.
func TestCaughtUp(t *testing.T) {
	// a (ID 1) leads with 100 entries committed; b (ID 2) is asked.
	st := func(id, leader, applied uint64, alarms ...string) *clientv3.StatusResponse {
		return &clientv3.StatusResponse{Header: &etcdserverpb.ResponseHeader{MemberId: id}, Leader: leader,
			RaftIndex: 100, RaftAppliedIndex: applied, Errors: alarms}
	}
	for _, tc := range []struct {
		name   string
		ask    string
		a, b   *clientv3.StatusResponse
		downA  bool
		downB  bool
		wantOK bool
	}{
		{name: "caught up", ask: "b", a: st(1, 1, 100), b: st(2, 1, 100), wantOK: true},
		{name: "behind", ask: "b", a: st(1, 1, 100), b: st(2, 1, 90)},
		{name: "the leader", ask: "a", a: st(1, 1, 100), b: st(2, 1, 0), wantOK: true},
		{name: "no leader", ask: "b", a: st(1, 0, 100), b: st(2, 0, 100)},
		{name: "an alarm", ask: "b", a: st(1, 1, 100), b: st(2, 1, 100, "NOSPACE")},
		{name: "down", ask: "b", a: st(1, 1, 100), b: st(2, 1, 100), downB: true},
		{name: "its leader down", ask: "b", a: st(1, 1, 100), b: st(2, 1, 100), downA: true},
		{name: "a leader not listed", ask: "b", a: st(1, 1, 100), b: st(2, 7, 100)},
		{name: "no such member", ask: "c", a: st(1, 1, 100), b: st(2, 1, 100)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := voters("a", "b")
			f.status = map[string]*clientv3.StatusResponse{"https://a:2379": tc.a, "https://b:2379": tc.b}
			f.down["https://a:2379"], f.down["https://b:2379"] = tc.downA, tc.downB
			ok, why := CaughtUp(context.Background(), f, tc.ask)
			if ok != tc.wantOK || (ok == (why != "")) {
				t.Errorf("CaughtUp(%s) = %v, %q; want %v, and a reason only when not", tc.ask, ok, why, tc.wantOK)
			}
		})
	}
}
