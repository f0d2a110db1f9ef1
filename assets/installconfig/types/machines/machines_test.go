package machines

import (
	"slices"
	"testing"
)

// TestIndex checks that Index reads back exactly the names Name makes for
// its cluster, and nothing else.
func TestIndex(t *testing.T) {
	tests := []struct {
		name string
		role string
		i    int
		ok   bool
	}{
		{"demo-x7k2p-master-0", RoleMaster, 0, true},
		{"demo-x7k2p-worker-12", RoleWorker, 12, true},
		{"demo-x7k2p-bootstrap", "", 0, false},
		{"demo-x7k2p-infra-0", "", 0, false},
		{"other-abcde-worker-0", "", 0, false},
		{"demo-x7k2p-worker-01", "", 0, false},
		{"demo-x7k2p-worker--1", "", 0, false},
		{"demo-x7k2p-worker-", "", 0, false},
	}
	for _, tt := range tests {
		role, i, ok := Index("demo-x7k2p", tt.name)
		if role != tt.role || i != tt.i || ok != tt.ok {
			t.Errorf("Index(%s) = %q, %d, %v; want %q, %d, %v", tt.name, role, i, ok, tt.role, tt.i, tt.ok)
		}
		if ok && Name("demo-x7k2p", role, i) != tt.name {
			t.Errorf("Name(Index(%s)) = %s", tt.name, Name("demo-x7k2p", role, i))
		}
	}
}

func TestDefaultShape(t *testing.T) {
	s := DefaultShape("demo-x7k2p", 3, 1)
	want := []string{"demo-x7k2p-master-0", "demo-x7k2p-master-1", "demo-x7k2p-master-2", "demo-x7k2p-worker-0"}
	if !slices.Equal(s.All(), want) || len(s.Masters) != 3 {
		t.Errorf("DefaultShape = %+v, want %q", s, want)
	}
	if got := DefaultShape("demo-x7k2p", 1, 0); got.Workers != nil || !slices.Equal(got.All(), want[:1]) {
		t.Errorf("DefaultShape(1, 0) = %+v", got)
	}
}
