package upgrade

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kiln-project/kiln/assets/release"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// v is mustVersion, short for the tables.
func v(s string) release.Version { return release.MustParseVersion(s) }

// cluster is a state of masters and workers that all run k8s and etcd,
// with kube-proxy at k8s and CoreDNS v1.15.0; master-1 leads etcd.
func cluster(masters, workers int, k8s, etcd string) State {
	s := State{Addons: map[Component]release.Version{KubeProxy: v(k8s), CoreDNS: v("v1.15.0")}, EtcdLeader: "master-1"}
	for i := range masters {
		s.Nodes = append(s.Nodes, Node{Name: "master-" + string(rune('0'+i)), Master: true, Versions: map[Component]release.Version{
			Etcd: v(etcd), KubeAPIServer: v(k8s), KubeControllerManager: v(k8s), KubeScheduler: v(k8s), Kubelet: v(k8s)}})
	}
	for i := range workers {
		s.Nodes = append(s.Nodes, Node{Name: "worker-" + string(rune('0'+i)), Versions: map[Component]release.Version{Kubelet: v(k8s)}})
	}
	return s
}

// to136 is v1.36.3 paired with etcd 3.6, as the issue asks the release
// table to pair them.
var to136 = release.Release{Kubernetes: "v1.36.3", KubernetesStaging: "v0.36.3", Etcd: "v3.6.16", CoreDNS: "v1.15.0"}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("%s differs (go test -update rewrites it):\n--- got\n%s--- want\n%s", name, got, want)
	}
}

func printed(p *Plan) string {
	var b bytes.Buffer
	p.Print(&b)
	return b.String()
}

func TestPlanMinorUpgradePrints(t *testing.T) {
	for _, tc := range []struct {
		golden string
		state  State
		to     release.Release
		o      Options
	}{
		{"minor-3+2.txt", cluster(3, 2, "v1.35.4", "3.5.35"), to136, Options{}},
		{"minor-3+3-batch2.txt", cluster(3, 3, "v1.35.4", "3.5.35"), to136, Options{WorkerBatch: 2}},
		{"patch-1+1.txt", cluster(1, 1, "v1.36.3", "3.6.16"), release.Release{Kubernetes: "v1.36.4", Etcd: "v3.6.16", CoreDNS: "v1.15.0"}, Options{}},
		// A cluster kiln made before v1.36.3 was paired with etcd 3.6:
		// only etcd changes, one member at a time.
		{"etcd-only-3+1.txt", cluster(3, 1, "v1.36.3", "3.5.35"), release.Default(), Options{}},
		// The release table's own pairs: the oldest release to the
		// default (a minor), the default's older patch to it.
		{"table-1+1.txt", cluster(1, 1, oldest.Kubernetes, oldest.Etcd), release.Default(), Options{}},
		{"table-patch-1+1.txt", cluster(1, 1, "v1.36.1", "3.6.16"), release.Default(), Options{}},
	} {
		p, err := MakePlan(tc.state, tc.to, tc.o)
		if err != nil {
			t.Fatalf("%s: %v", tc.golden, err)
		}
		golden(t, tc.golden, printed(p))
	}
}

// flat lists a plan's changes as "node component" in order, add-ons as
// "add-ons component".
func flat(p *Plan) []string {
	var out []string
	for _, st := range p.Steps {
		for _, c := range st.Changes {
			out = append(out, st.Where()+" "+string(c.Component))
		}
	}
	return out
}

func TestPlanOrder(t *testing.T) {
	p, err := MakePlan(cluster(3, 2, "v1.35.4", "3.5.35"), to136, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		// etcd member by member, the leader (master-1) last
		"master-0 etcd", "master-2 etcd", "master-1 etcd",
		// each master's API server, then what talks to it only
		"master-0 kube-apiserver", "master-0 kube-controller-manager", "master-0 kube-scheduler",
		"master-2 kube-apiserver", "master-2 kube-controller-manager", "master-2 kube-scheduler",
		"master-1 kube-apiserver", "master-1 kube-controller-manager", "master-1 kube-scheduler",
		// kubelets once no API server is older
		"master-0 kubelet", "master-2 kubelet", "master-1 kubelet",
		"worker-0 kubelet", "worker-1 kubelet",
		"add-ons kube-proxy",
	}
	if got := flat(p); !slices.Equal(got, want) {
		t.Errorf("order:\n got %q\nwant %q", got, want)
	}
	for _, st := range p.Steps {
		kubelet := st.Changes[0].Component == Kubelet
		if st.Drain != kubelet {
			t.Errorf("%s %s: drain %v, want %v (a kubelet's restart drains its node)", st.Where(), st.Changes[0].Component, st.Drain, kubelet)
		}
	}
	if p.From != v("v1.35.4") || p.Partly {
		t.Errorf("from %s partly %v, want v1.35.4, false", p.From, p.Partly)
	}
}

func TestPlanResumesWhereAnUpgradeStopped(t *testing.T) {
	s := cluster(3, 1, "v1.35.4", "3.5.35")
	for _, n := range []string{"master-0", "master-2", "master-1"} {
		s.node(n).Versions[Etcd] = v("3.6.16")
	}
	m0 := s.node("master-0").Versions
	m0[KubeAPIServer], m0[KubeControllerManager] = v("v1.36.3"), v("v1.36.3")
	p, err := MakePlan(s, to136, Options{})
	if err != nil {
		t.Fatal(err)
	}
	got := flat(p)
	if got[0] != "master-0 kube-scheduler" || slices.Contains(got, "master-0 etcd") || slices.Contains(got, "master-0 kube-apiserver") {
		t.Errorf("a resumed plan must start with what is left (master-0's scheduler): %q", got)
	}
	if !p.Partly || p.From != v("v1.35.4") {
		t.Errorf("from %s partly %v, want v1.35.4 partly", p.From, p.Partly)
	}
	if !strings.Contains(printed(p), "(partly upgraded already)") {
		t.Errorf("the plan must say it was begun before:\n%s", printed(p))
	}
}

func TestPlanNothingToDo(t *testing.T) {
	p, err := MakePlan(cluster(1, 1, "v1.36.3", "3.6.16"), to136, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !p.Empty() || printed(p) != "Nothing to upgrade: the cluster runs v1.36.3.\n" {
		t.Errorf("want an empty plan, got %q", printed(p))
	}
}

func TestPlanRefuses(t *testing.T) {
	for _, tc := range []struct {
		name  string
		state func() State
		to    release.Release
		want  []string // each a reason's substring
	}{
		{"downgrade", func() State { return cluster(1, 1, "v1.36.3", "3.6.16") },
			release.Release{Kubernetes: "v1.35.4", Etcd: "v3.5.35", CoreDNS: "v1.15.0"},
			[]string{"master-0: etcd runs 3.6.16, newer than 3.5.35: kiln does not downgrade",
				"master-0: kube-apiserver runs v1.36.3, newer than v1.35.4", "worker-0: kubelet runs v1.36.3", "add-ons: kube-proxy runs v1.36.3"}},
		{"patch downgrade", func() State { return cluster(1, 0, "v1.36.4", "3.6.16") }, to136,
			[]string{"master-0: kube-apiserver runs v1.36.4, newer than v1.36.3"}},
		{"skipped minor", func() State { return cluster(1, 1, "v1.34.7", "3.5.35") }, to136,
			[]string{"master-0: kube-apiserver runs v1.34.7, more than one minor older than v1.36.3: upgrade through each minor in turn",
				"worker-0: kubelet runs v1.34.7"}},
		{"etcd minor skipped", func() State { return cluster(1, 0, "v1.35.4", "3.4.30") }, to136,
			[]string{"master-0: etcd runs 3.4.30, more than one minor older than 3.6.16"}},
		{"kubelet newer than an API server already", func() State {
			s := cluster(3, 1, "v1.35.4", "3.5.35")
			s.node("worker-0").Versions[Kubelet] = v("v1.36.3")
			return s
		}, to136, []string{"the cluster breaks the version-skew policy already: worker-0: kubelet v1.36.3 would be newer than the API server on master-0 (v1.35.4)"}},
		{"an etcd 3.5 too old for 3.6", func() State { return cluster(3, 0, "v1.35.4", "3.5.20") }, to136,
			[]string{"step 1 (master-0: etcd to 3.6.16) would break the version-skew policy: master-1: etcd 3.5.20 would run beside etcd 3.6.16 on master-0; a 3.5 member needs 3.5.26 or later"}},
	} {
		_, err := MakePlan(tc.state(), tc.to, Options{})
		var r *RefusedError
		if !errors.As(err, &r) {
			t.Errorf("%s: want a refusal, got %v", tc.name, err)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: refusal lacks %q:\n%v", tc.name, w, err)
			}
		}
	}
}
