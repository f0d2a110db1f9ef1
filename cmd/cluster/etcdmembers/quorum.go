package etcdmembers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// ErrQuorum is what every *QuorumError is: a member may not go because
// etcd would lose its quorum.
var ErrQuorum = errors.New("etcd quorum")

// QuorumError refuses to let the member Leaving stop voting: no voting
// member would be left, or fewer than a majority of those left (Left)
// answer; Down names those that do not.
type QuorumError struct {
	Leaving string
	Left    []string
	Down    []string
}

// Error says why the member may not go, naming the members that do not
// answer.
func (e *QuorumError) Error() string {
	if len(e.Left) == 0 {
		return ErrQuorum.Error() + ": it is the last voting member"
	}
	verb := "does"
	if len(e.Down) > 1 {
		verb = "do"
	}
	return fmt.Sprintf("%s: only %d of the %d members left would answer (%s %s not): etcd would lose quorum",
		ErrQuorum, len(e.Left)-len(e.Down), len(e.Left), strings.Join(e.Down, ", "), verb)
}

// Unwrap makes errors.Is(err, ErrQuorum) true.
func (e *QuorumError) Unwrap() error { return ErrQuorum }

// Health is a member as it answered when asked for its status.
type Health struct {
	Member *etcdserverpb.Member
	// Status is its answer; nil when it did not answer.
	Status *clientv3.StatusResponse
	// Err is why it did not answer.
	Err error
}

// errNoClientURL is the Health.Err of a member that has no client URL (a
// learner that has not started).
var errNoClientURL = errors.New("no client URL")

// StatusTimeout bounds each member's answer in Check: the etcd client
// waits for a connection as long as its context lets it, so a member that
// is down would otherwise hold the check up for good.
const StatusTimeout = 5 * time.Second

// Check asks each of members for its status at its first client URL, in
// order; one that has not answered within StatusTimeout counts as down.
func Check(ctx context.Context, c Client, members []*etcdserverpb.Member) []Health {
	out := make([]Health, 0, len(members))
	for _, m := range members {
		h := Health{Member: m, Err: errNoClientURL}
		if len(m.ClientURLs) > 0 {
			sctx, cancel := context.WithTimeout(ctx, StatusTimeout)
			h.Status, h.Err = c.Status(sctx, m.ClientURLs[0])
			cancel()
		}
		out = append(out, h)
	}
	return out
}

// Quorum checks that the voting members of members other than leaving
// would keep a majority that answers if leaving stopped voting (removed,
// or stopped for a change); it returns a *QuorumError when not. Every
// voting member left is asked for its status.
func Quorum(ctx context.Context, c Client, members []*etcdserverpb.Member, leaving string) error {
	var left []*etcdserverpb.Member
	for _, m := range members {
		if m.Name != leaving && !m.IsLearner {
			left = append(left, m)
		}
	}
	e := &QuorumError{Leaving: leaving}
	for _, h := range Check(ctx, c, left) {
		e.Left = append(e.Left, nameOf(h.Member))
		if h.Err != nil {
			e.Down = append(e.Down, nameOf(h.Member))
		}
	}
	if len(e.Left) == 0 || len(e.Left)-len(e.Down) < len(e.Left)/2+1 {
		return e
	}
	return nil
}

// Remove removes the member named name after Quorum allowed it; force, or
// the member being a learner (it does not vote), skips that check's
// verdict. It reports false when name has no member (removed already).
func Remove(ctx context.Context, c Client, name string, force bool) (bool, error) {
	list, err := c.MemberList(ctx)
	if err != nil {
		return false, fmt.Errorf("etcd member list: %w", err)
	}
	m := ByName(list.Members, name)
	if m == nil {
		return false, nil
	}
	if err := Quorum(ctx, c, list.Members, name); err != nil && !force && !m.IsLearner {
		return false, fmt.Errorf("removing %s: %w", name, err)
	}
	if _, err := c.MemberRemove(ctx, m.ID); err != nil {
		return false, fmt.Errorf("remove etcd member %s: %w", name, err)
	}
	return true, nil
}
