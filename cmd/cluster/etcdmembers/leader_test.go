package etcdmembers

import (
	"context"
	"errors"
	"testing"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// fakeMover answers Status as member self with leader, and records moves.
type fakeMover struct {
	self, leader uint64
	statusErr    error
	moveErr      error
	moved        []uint64
	endpoints    []string
}

func (f *fakeMover) Status(_ context.Context, endpoint string) (*clientv3.StatusResponse, error) {
	f.endpoints = append(f.endpoints, endpoint)
	if f.statusErr != nil {
		return nil, f.statusErr
	}
	return &clientv3.StatusResponse{Header: &etcdserverpb.ResponseHeader{MemberId: f.self}, Leader: f.leader}, nil
}

func (f *fakeMover) MoveLeader(_ context.Context, to uint64) (*clientv3.MoveLeaderResponse, error) {
	if f.moveErr != nil {
		return nil, f.moveErr
	}
	f.moved = append(f.moved, to)
	return &clientv3.MoveLeaderResponse{}, nil
}

func TestMoveLeader(t *testing.T) {
	const endpoint = "https://127.0.0.1:2379"
	boom := errors.New("boom")
	tests := []struct {
		name      string
		f         fakeMover
		wantMoved bool
		wantErr   error
	}{
		{"leads: hands over", fakeMover{self: 1, leader: 1}, true, nil},
		{"follower: nothing to do", fakeMover{self: 1, leader: 2}, false, nil},
		{"status fails", fakeMover{self: 1, leader: 1, statusErr: boom}, false, boom},
		{"move fails", fakeMover{self: 1, leader: 1, moveErr: boom}, false, boom},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			moved, err := MoveLeader(context.Background(), &tt.f, endpoint, 7)
			if moved != tt.wantMoved || !errors.Is(err, tt.wantErr) {
				t.Errorf("MoveLeader = %v, %v; want %v, %v", moved, err, tt.wantMoved, tt.wantErr)
			}
			if len(tt.f.endpoints) != 1 || tt.f.endpoints[0] != endpoint {
				t.Errorf("asked %q for its status, want %s once", tt.f.endpoints, endpoint)
			}
			if want := tt.wantMoved; (len(tt.f.moved) == 1 && tt.f.moved[0] == 7) != want {
				t.Errorf("moved to %v", tt.f.moved)
			}
		})
	}
}

func TestTransferee(t *testing.T) {
	members := []*etcdserverpb.Member{
		{ID: 1, Name: "bootstrap"},
		{ID: 9, Name: "master-2"},
		{ID: 3, Name: "master-1", IsLearner: true},
		{ID: 5, Name: "master-0"},
	}
	if got := Transferee(members, 1); got == nil || got.Name != "master-0" {
		t.Errorf("Transferee = %v, want master-0 (the lowest voting ID but the bootstrap's)", got)
	}
	if got := Transferee(members[:1], 1); got != nil {
		t.Errorf("Transferee of a lone bootstrap member = %v, want none", got)
	}
}
