package upgrade

import (
	"slices"
	"strings"
	"testing"

	"github.com/kiln-project/kiln/assets/release"
)

func TestViolations(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*State)
		want   string // a violation's substring; "" for none
	}{
		{"a cluster at one release", func(*State) {}, ""},
		{"API servers one minor apart", func(s *State) { s.node("master-0").Versions[KubeAPIServer] = v("v1.36.3") }, ""},
		{"API servers two minors apart", func(s *State) { s.node("master-0").Versions[KubeAPIServer] = v("v1.37.0") },
			"the API servers are 2 minors apart (v1.35.4 on master-1, v1.37.0 on master-0); at most 1"},
		{"controller manager newer than its API server", func(s *State) {
			s.node("master-2").Versions[KubeControllerManager] = v("v1.36.3")
		}, "master-2: kube-controller-manager v1.36.3 would be newer than its API server (v1.35.4)"},
		{"scheduler newer than another master's API server, not its own", func(s *State) {
			m := s.node("master-2").Versions
			m[KubeAPIServer], m[KubeScheduler] = v("v1.36.3"), v("v1.36.3")
		}, ""},
		{"scheduler two minors behind its API server", func(s *State) {
			s.node("master-0").Versions[KubeScheduler] = v("v1.33.1")
		}, "master-0: kube-scheduler v1.33.1 would be 2 minors older than its API server (v1.35.4); at most 1"},
		{"kubelet newer than the oldest API server", func(s *State) {
			s.node("master-0").Versions[KubeAPIServer] = v("v1.36.3")
			s.node("worker-0").Versions[Kubelet] = v("v1.36.3")
		}, "worker-0: kubelet v1.36.3 would be newer than the API server on master-1 (v1.35.4)"},
		{"kubelet three minors behind", func(s *State) { s.node("worker-0").Versions[Kubelet] = v("v1.32.9") }, ""},
		{"kubelet four minors behind", func(s *State) { s.node("worker-0").Versions[Kubelet] = v("v1.31.9") },
			"worker-0: kubelet v1.31.9 would be 4 minors older than the API server on master-0 (v1.35.4); at most 3"},
		{"kube-proxy newer than the oldest API server", func(s *State) { s.Addons[KubeProxy] = v("v1.36.0") },
			"kube-proxy v1.36.0 would be newer than the API server on master-0 (v1.35.4)"},
		{"etcd two minors apart", func(s *State) { s.node("master-1").Versions[Etcd] = v("3.7.0") },
			"the etcd members are 2 minors apart (3.5.35 on master-0, 3.7.0 on master-1); at most 1"},
		{"etcd 3.6 beside 3.5.35", func(s *State) { s.node("master-1").Versions[Etcd] = v("3.6.16") }, ""},
		{"etcd 3.6 beside 3.5.25", func(s *State) {
			s.node("master-1").Versions[Etcd] = v("3.6.16")
			s.node("master-2").Versions[Etcd] = v("3.5.25")
		}, "master-2: etcd 3.5.25 would run beside etcd 3.6.16 on master-1; a 3.5 member needs 3.5.26 or later beside 3.6"},
		{"unknown versions are left out", func(s *State) {
			s.node("master-0").Versions[KubeAPIServer] = release.Version{}
			s.node("worker-0").Versions[Kubelet] = release.Version{}
		}, ""},
	} {
		s := cluster(3, 1, "v1.35.4", "3.5.35")
		tc.change(&s)
		got := Violations(s)
		switch {
		case tc.want == "" && len(got) > 0:
			t.Errorf("%s: want none, got %q", tc.name, got)
		case tc.want != "" && !slices.ContainsFunc(got, func(g string) bool { return strings.Contains(g, tc.want) }):
			t.Errorf("%s: want a violation with %q, got %q", tc.name, tc.want, got)
		}
	}
}
