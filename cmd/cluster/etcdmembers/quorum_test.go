package etcdmembers

import (
	"context"
	"errors"
	"reflect"
	"testing"
)

// TestQuorum checks when a voting member may stop voting: a majority of
// the voting members left must answer, learners do not count, and the
// refusal names who is left and who does not answer.
func TestQuorum(t *testing.T) {
	for _, tc := range []struct {
		name      string
		members   []string
		learners  []string // of members
		down      []string
		leaving   string
		left, bad []string // the refusal's Left and Down; nil: allowed
	}{
		{name: "3 to 2, all answer", members: []string{"a", "b", "c"}, leaving: "c"},
		{name: "3 to 2, on the way to 1", members: []string{"a", "b", "c"}, down: []string{"c"}, leaving: "c"},
		{name: "a second one down", members: []string{"a", "b", "c"}, down: []string{"b"}, leaving: "c",
			left: []string{"a", "b"}, bad: []string{"b"}},
		{name: "5 to 4, one down", members: []string{"a", "b", "c", "d", "e"}, down: []string{"e"}, leaving: "a"},
		{name: "5 to 4, two down", members: []string{"a", "b", "c", "d", "e"}, down: []string{"d", "e"}, leaving: "a",
			left: []string{"b", "c", "d", "e"}, bad: []string{"d", "e"}},
		{name: "the last voter", members: []string{"a"}, leaving: "a", left: []string{}},
		{name: "the last voter, a learner left", members: []string{"a", "l"}, learners: []string{"l"}, leaving: "a", left: []string{}},
		{name: "a learner does not answer", members: []string{"a", "b", "l"}, learners: []string{"l"}, down: []string{"l"}, leaving: "b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := voters(tc.members...)
			for _, m := range f.members {
				for _, l := range tc.learners {
					m.IsLearner = m.IsLearner || m.Name == l
				}
				for _, d := range tc.down {
					f.down[m.ClientURLs[0]] = f.down[m.ClientURLs[0]] || m.Name == d
				}
			}
			err := Quorum(context.Background(), f, f.members, tc.leaving)
			if tc.left == nil {
				if err != nil {
					t.Fatalf("Quorum = %v, want nil", err)
				}
				return
			}
			var qe *QuorumError
			if !errors.As(err, &qe) || !errors.Is(err, ErrQuorum) {
				t.Fatalf("Quorum = %v, want a *QuorumError", err)
			}
			if qe.Leaving != tc.leaving || len(qe.Left) != len(tc.left) || (len(tc.left) > 0 && !reflect.DeepEqual(qe.Left, tc.left)) ||
				!reflect.DeepEqual(qe.Down, tc.bad) {
				t.Errorf("refusal = %+v, want leaving %s, left %q, down %q", qe, tc.leaving, tc.left, tc.bad)
			}
		})
	}
}

// TestQuorumErrorNamesMembers checks the refusal's words: the members
// that do not answer are named.
func TestQuorumErrorNamesMembers(t *testing.T) {
	for _, tc := range []struct {
		err  QuorumError
		want string
	}{
		{QuorumError{Leaving: "a"}, "etcd quorum: it is the last voting member"},
		{QuorumError{Leaving: "c", Left: []string{"a", "b"}, Down: []string{"b"}},
			"etcd quorum: only 1 of the 2 members left would answer (b does not): etcd would lose quorum"},
		{QuorumError{Leaving: "a", Left: []string{"b", "c", "d", "e"}, Down: []string{"d", "e"}},
			"etcd quorum: only 2 of the 4 members left would answer (d, e do not): etcd would lose quorum"},
	} {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("Error() = %q, want %q", got, tc.want)
		}
	}
}

// TestRemove checks that Remove removes a member only when Quorum allows
// it, or with force, or when it is a learner, and that a member already
// gone is no error.
func TestRemove(t *testing.T) {
	ctx := context.Background()
	t.Run("refused", func(t *testing.T) {
		f := voters("a", "b", "c")
		f.down["https://b:2379"] = true
		removed, err := Remove(ctx, f, "c", false)
		var qe *QuorumError
		if removed || !errors.As(err, &qe) || !reflect.DeepEqual(qe.Down, []string{"b"}) {
			t.Fatalf("Remove = %v, %v; want a refusal naming b", removed, err)
		}
		if len(f.changes) != 0 {
			t.Errorf("changes = %q, want none", f.changes)
		}
	})
	t.Run("forced", func(t *testing.T) {
		f := voters("a", "b", "c")
		f.down["https://b:2379"] = true
		if removed, err := Remove(ctx, f, "c", true); !removed || err != nil {
			t.Fatalf("Remove = %v, %v; want removed", removed, err)
		}
		if !reflect.DeepEqual(f.changes, []string{"remove c"}) {
			t.Errorf("changes = %q", f.changes)
		}
	})
	t.Run("the last voter's learner", func(t *testing.T) {
		f := voters("a", "l")
		f.members[1].IsLearner = true
		if removed, err := Remove(ctx, f, "l", false); !removed || err != nil {
			t.Fatalf("Remove = %v, %v; want removed", removed, err)
		}
	})
	t.Run("gone already", func(t *testing.T) {
		f := voters("a", "b")
		if removed, err := Remove(ctx, f, "c", false); removed || err != nil {
			t.Fatalf("Remove = %v, %v; want false, nil", removed, err)
		}
	})
	t.Run("membership unreadable", func(t *testing.T) {
		f := voters("a", "b")
		f.listErr = errDown
		if _, err := Remove(ctx, f, "b", false); !errors.Is(err, errDown) {
			t.Fatalf("Remove = %v, want the list's error", err)
		}
	})
}
