package etcdmembers

import (
	"context"
	"fmt"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
)

// Installer puts a learner's certificates and static pod on its machine;
// PodInstaller does it through the etcd installer pod.
type Installer interface {
	// Install installs the learner with ID id, just added to members.
	Install(ctx context.Context, members []*etcdserverpb.Member, id uint64) error
	// Lost reports whether the install of a learner that has not started
	// is gone (a run cut short between the add and the install, or an
	// install that failed), so that Join installs it again.
	Lost(ctx context.Context) bool
}

// Step is what one call of Join found or did.
type Step int

// The steps of a join. Join returns Voting once the member votes; every
// other step means "call again".
const (
	// Voting: the member votes; the join is done.
	Voting Step = iota + 1
	// Unlisted: the membership could not be read (Progress.Err says why).
	Unlisted
	// WaitingForLearner: another learner (Progress.Learner) is joining,
	// and etcd takes one learner at a time.
	WaitingForLearner
	// Added: the member was added as a learner and installed.
	Added
	// Reinstalled: a learner whose install was lost was installed again.
	Reinstalled
	// NotStarted: the learner was added but has not started yet.
	NotStarted
	// NotReady: etcd refused to promote the learner (Progress.Err), as it
	// does until the learner has caught up with the leader.
	NotReady
	// Promoted: the learner was promoted to voter.
	Promoted
)

// Progress is where a join stands after one call of Join.
type Progress struct {
	Step Step
	// Learner names the learner waited for (WaitingForLearner).
	Learner string
	// Err is why the membership could not be read (Unlisted) or the
	// learner could not be promoted (NotReady).
	Err error
}

// Join makes at most one change towards the member name with peer URL
// peerURL voting: with no member at peerURL and no other learner, it adds
// one as a learner and has install put it on its machine; a learner that
// has not started is installed again when its install was lost; a learner
// that started is promoted, which etcd refuses until it has caught up, so
// the caller retries until Join returns Voting. Only a failed add or
// install is an error (with a failed install, Progress still says the
// learner was added); the caller words every Progress itself.
func Join(ctx context.Context, c Client, name, peerURL string, install Installer) (Progress, error) {
	list, err := c.MemberList(ctx)
	if err != nil {
		return Progress{Step: Unlisted, Err: err}, nil
	}
	m := byPeerURL(list.Members, peerURL)
	switch {
	case m == nil:
		if l := learner(list.Members); l != nil {
			return Progress{Step: WaitingForLearner, Learner: l.Name}, nil
		}
		resp, err := c.MemberAddAsLearner(ctx, []string{peerURL})
		if err != nil {
			return Progress{}, fmt.Errorf("add etcd member %s: %w", name, err)
		}
		return Progress{Step: Added}, install.Install(ctx, resp.Members, resp.Member.ID)
	case m.IsLearner && m.Name == "":
		if install.Lost(ctx) {
			return Progress{Step: Reinstalled}, install.Install(ctx, list.Members, m.ID)
		}
		return Progress{Step: NotStarted}, nil
	case m.IsLearner:
		if _, err := c.MemberPromote(ctx, m.ID); err != nil {
			return Progress{Step: NotReady, Err: err}, nil
		}
		return Progress{Step: Promoted}, nil
	}
	return Progress{Step: Voting}, nil
}
