package registry

import "testing"

func TestParseReference(t *testing.T) {
	tests := []struct {
		ref  string
		want reference
	}{
		{"nginx", reference{"docker.io", "library/nginx", "latest"}},
		{"nginx:1.27", reference{"docker.io", "library/nginx", "1.27"}},
		{"me/app:v1", reference{"docker.io", "me/app", "v1"}},
		{"index.docker.io/me/app:v1", reference{"docker.io", "me/app", "v1"}},
		{"registry.k8s.io/e2e-test-images/kitten:1.8", reference{"registry.k8s.io", "e2e-test-images/kitten", "1.8"}},
		{"kiln.local/pause:3.10", reference{"kiln.local", "pause", "3.10"}},
		{"localhost:5001/app", reference{"localhost:5001", "app", "latest"}},
		{"localhost/app:2", reference{"localhost", "app", "2"}},
	}
	for _, tt := range tests {
		got, err := parseReference(tt.ref)
		if err != nil || got != tt.want {
			t.Errorf("parseReference(%q) = %+v, %v; want %+v", tt.ref, got, err, tt.want)
		}
	}
	for _, bad := range []string{"", "app@sha256:0123", "localhost:5001/", "a b"} {
		if got, err := parseReference(bad); err == nil {
			t.Errorf("parseReference(%q) = %+v, want an error", bad, got)
		}
	}
}

func TestDestination(t *testing.T) {
	n := Names{Self: "localhost:5001", Mirrors: []string{"kiln.local", "registry.k8s.io", "docker.io"}}
	tests := []struct {
		ref, repo, tag string
		ok             bool
	}{
		{"localhost:5001/team/app:v1", "team/app", "v1", true},
		{"registry.k8s.io/pause:3.10.2", "registry.k8s.io/pause", "3.10.2", true},
		{"kiln.local/etcd:v3.5.35", "kiln.local/etcd", "v3.5.35", true},
		{"nginx", "docker.io/library/nginx", "latest", true},
		{"quay.io/me/app:1", "", "", false},
		{"localhost:5002/app:1", "", "", false}, // another cluster's registry
	}
	for _, tt := range tests {
		repo, tag, ok, err := n.destination(tt.ref)
		if err != nil || repo != tt.repo || tag != tt.tag || ok != tt.ok {
			t.Errorf("destination(%q) = %q %q %v %v; want %q %q %v", tt.ref, repo, tag, ok, err, tt.repo, tt.tag, tt.ok)
		}
	}
}
