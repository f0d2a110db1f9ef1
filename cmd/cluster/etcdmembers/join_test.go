package etcdmembers

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
)

// TestJoinSteps walks one member through every step of a join against a
// fake membership, one call of Join at a time, checking what each call
// did to the membership and what it reported.
func TestJoinSteps(t *testing.T) {
	ctx := context.Background()
	f := voters("a")
	inst := &fakeInstaller{}
	const peer = "https://new:2380"
	refused := errors.New("etcdserver: can only promote a learner member which is in sync with leader")
	join := func(want Step) Progress {
		t.Helper()
		p, err := Join(ctx, f, "new", peer, inst)
		if err != nil || p.Step != want {
			t.Fatalf("Join = %+v, %v; want step %d", p, err, want)
		}
		return p
	}

	// Another learner joins first: nothing is added.
	f.members = append(f.members, &etcdserverpb.Member{ID: 99, Name: "other", PeerURLs: []string{"https://other:2380"}, IsLearner: true})
	if p := join(WaitingForLearner); p.Learner != "other" {
		t.Errorf("waited for learner %q, want other", p.Learner)
	}
	f.members = f.members[:1]

	join(Added)
	if want := []string{"a=https://a:2380,new=https://new:2380"}; !reflect.DeepEqual(inst.installs, want) {
		t.Errorf("installs = %q, want %q", inst.installs, want)
	}
	join(NotStarted)
	inst.lost = true
	join(Reinstalled)
	if len(inst.installs) != 2 || inst.installs[1] != inst.installs[0] {
		t.Errorf("reinstall with --initial-cluster %q, want the first install's", inst.installs)
	}
	f.members[1].Name = "new" // the learner started
	f.refuse = refused
	if p := join(NotReady); !errors.Is(p.Err, refused) {
		t.Errorf("NotReady error = %v, want etcd's refusal", p.Err)
	}
	f.refuse = nil
	join(Promoted)
	join(Voting)
	if want := []string{"add " + peer, "promote new"}; !reflect.DeepEqual(f.changes, want) {
		t.Errorf("changes = %q, want %q", f.changes, want)
	}

	f.listErr = errors.New("no leader")
	if p := join(Unlisted); !errors.Is(p.Err, f.listErr) {
		t.Errorf("Unlisted error = %v, want the list's", p.Err)
	}
}

// TestJoinInstallFails: a failed install is an error, reported with the
// step that added the learner; the next call installs again once the
// install is lost.
func TestJoinInstallFails(t *testing.T) {
	ctx := context.Background()
	f := voters("a")
	boom := errors.New("secrets is forbidden")
	inst := &fakeInstaller{err: boom, lost: true}
	p, err := Join(ctx, f, "new", "https://new:2380", inst)
	if !errors.Is(err, boom) || p.Step != Added {
		t.Fatalf("Join = %+v, %v; want Added and the install's error", p, err)
	}
	inst.err = nil
	if p, err := Join(ctx, f, "new", "https://new:2380", inst); err != nil || p.Step != Reinstalled {
		t.Fatalf("Join after the failure = %+v, %v; want Reinstalled", p, err)
	}
}
