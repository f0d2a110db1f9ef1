package bootkube

import (
	"context"
	"io"
	"net"
	"reflect"
	"testing"

	"github.com/sirupsen/logrus"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// handoverEtcd is fakeCluster with what the handover asks besides growing:
// each member answers its status, leadership moves, members go.
type handoverEtcd struct {
	*fakeCluster
	leader  uint64
	calls   []string // what was asked, in order
	dialled [][]string
}

func (h *handoverEtcd) Status(_ context.Context, endpoint string) (*clientv3.StatusResponse, error) {
	var id uint64
	for _, m := range h.members {
		if len(m.ClientURLs) > 0 && m.ClientURLs[0] == endpoint {
			id = m.ID
		}
	}
	if endpoint == localEtcd {
		id = 1
	}
	return &clientv3.StatusResponse{Header: &etcdserverpb.ResponseHeader{MemberId: id}, Leader: h.leader}, nil
}

func (h *handoverEtcd) MoveLeader(_ context.Context, to uint64) (*clientv3.MoveLeaderResponse, error) {
	h.calls = append(h.calls, "move leader")
	h.leader = to
	return &clientv3.MoveLeaderResponse{}, nil
}

func (h *handoverEtcd) MemberRemove(_ context.Context, id uint64) (*clientv3.MemberRemoveResponse, error) {
	h.calls = append(h.calls, "remove member")
	var left []*etcdserverpb.Member
	for _, m := range h.members {
		if m.ID != id {
			left = append(left, m)
		}
	}
	h.members = left
	return &clientv3.MemberRemoveResponse{}, nil
}

func (h *handoverEtcd) Close() error { return nil }

// On slower hardware the bootstrap machine's whole control plane goes as
// soon as the masters' members vote: the API server, controller manager
// and scheduler, then (leadership handed to the master first) its etcd
// member, removed through the masters' endpoints, and its etcd pod. A
// restarted bootkube finds nothing left to do.
func TestRetireFirstLeavesTheMastersAlone(t *testing.T) {
	pods, retired := staticPodDirs(t)
	// The bootstrap API server's port: closed, as after its pod stopped.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()

	etcd := &handoverEtcd{leader: 1, fakeCluster: &fakeCluster{members: []*etcdserverpb.Member{
		{ID: 1, Name: "boot", ClientURLs: []string{"https://10.66.0.10:2379"}},
		{ID: 2, Name: "m-0", ClientURLs: []string{"https://10.66.0.11:2379"}},
	}}}
	log := logrus.New()
	log.SetOutput(io.Discard)
	g := &grower{
		cfg: Config{NodeName: "boot", StaticPodDir: pods, RetiredPodDir: retired, APIAddress: addr, Log: log},
		dialEtcd: func(endpoints []string) (etcdClient, error) {
			etcd.dialled = append(etcd.dialled, endpoints)
			return etcd, nil
		},
	}
	masters := []master{{Name: "m-0", IP: "10.66.0.11"}}
	if err := g.retireFirst(context.Background(), masters); err != nil {
		t.Fatal(err)
	}
	if left := names(t, pods); len(left) != 0 {
		t.Errorf("static pods left on the bootstrap machine: %v", left)
	}
	if got := names(t, retired); !reflect.DeepEqual(got, bootstrapPods()) {
		t.Errorf("retired %v, want %v", got, bootstrapPods())
	}
	if want := []string{"move leader", "remove member"}; !reflect.DeepEqual(etcd.calls, want) {
		t.Errorf("etcd calls %v, want %v", etcd.calls, want)
	}
	if etcd.leader != 2 || len(etcd.members) != 1 || etcd.members[0].Name != "m-0" {
		t.Errorf("leader %d, members %v: want m-0 alone and leading", etcd.leader, etcd.members)
	}
	if want := []string{"https://10.66.0.11:2379"}; len(etcd.dialled) == 0 || !reflect.DeepEqual(etcd.dialled[0], want) {
		t.Errorf("dialled %v first, want the masters' members %v", etcd.dialled, want)
	}

	// A restarted bootkube (retireFirst again): no change, no error.
	etcd.calls = nil
	if err := g.retireFirst(context.Background(), masters); err != nil {
		t.Fatal(err)
	}
	if len(etcd.calls) != 0 || len(etcd.members) != 1 {
		t.Errorf("second run: calls %v, members %v", etcd.calls, etcd.members)
	}
}
