package etcdmembers

import (
	"context"
	"errors"
	"slices"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// errDown is the answer of a fake member that is down.
var errDown = errors.New("connection refused")

// fakeEtcd is an in-memory membership whose members answer Status at
// their client URL unless down; it records the changes made.
type fakeEtcd struct {
	members []*etcdserverpb.Member
	down    map[string]bool // client URL -> does not answer
	// status is the answer at a client URL; an empty one when absent.
	status  map[string]*clientv3.StatusResponse
	nextID  uint64
	listErr error // MemberList fails with it
	refuse  error // MemberPromote fails with it
	changes []string
}

func (f *fakeEtcd) MemberList(context.Context, ...clientv3.OpOption) (*clientv3.MemberListResponse, error) {
	if f.listErr != nil {
		return nil, f.listErr
	}
	return &clientv3.MemberListResponse{Members: f.members}, nil
}

func (f *fakeEtcd) MemberAddAsLearner(_ context.Context, urls []string) (*clientv3.MemberAddResponse, error) {
	f.nextID++
	m := &etcdserverpb.Member{ID: f.nextID, PeerURLs: urls, IsLearner: true}
	f.members = append(f.members, m)
	f.changes = append(f.changes, "add "+urls[0])
	return &clientv3.MemberAddResponse{Member: m, Members: f.members}, nil
}

func (f *fakeEtcd) MemberPromote(_ context.Context, id uint64) (*clientv3.MemberPromoteResponse, error) {
	if f.refuse != nil {
		return nil, f.refuse
	}
	m := f.byID(id)
	m.IsLearner = false
	f.changes = append(f.changes, "promote "+m.Name)
	return &clientv3.MemberPromoteResponse{}, nil
}

func (f *fakeEtcd) MemberRemove(_ context.Context, id uint64) (*clientv3.MemberRemoveResponse, error) {
	f.changes = append(f.changes, "remove "+f.byID(id).Name)
	f.members = slices.DeleteFunc(f.members, func(m *etcdserverpb.Member) bool { return m.ID == id })
	return &clientv3.MemberRemoveResponse{}, nil
}

func (f *fakeEtcd) Status(_ context.Context, endpoint string) (*clientv3.StatusResponse, error) {
	if f.down[endpoint] {
		return nil, errDown
	}
	if st := f.status[endpoint]; st != nil {
		return st, nil
	}
	return &clientv3.StatusResponse{}, nil
}

func (f *fakeEtcd) byID(id uint64) *etcdserverpb.Member {
	for _, m := range f.members {
		if m.ID == id {
			return m
		}
	}
	return nil
}

// voters returns a fakeEtcd of started voting members named names, each
// at "https://<name>:2379".
func voters(names ...string) *fakeEtcd {
	f := &fakeEtcd{down: map[string]bool{}}
	for _, n := range names {
		f.nextID++
		f.members = append(f.members, &etcdserverpb.Member{ID: f.nextID, Name: n,
			PeerURLs: []string{"https://" + n + ":2380"}, ClientURLs: []string{"https://" + n + ":2379"}})
	}
	return f
}

// fakeInstaller records its installs; lost is what Lost answers.
type fakeInstaller struct {
	installs []string // the --initial-cluster of each
	lost     bool
	err      error
}

func (i *fakeInstaller) Install(_ context.Context, members []*etcdserverpb.Member, id uint64) error {
	i.installs = append(i.installs, initialCluster(members, id, "new"))
	return i.err
}

func (i *fakeInstaller) Lost(context.Context) bool { return i.lost }
