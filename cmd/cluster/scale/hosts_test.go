package scale

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/kiln-project/kiln/assets/installconfig/installconfigtest"
	"github.com/kiln-project/kiln/assets/installconfig/types"
	"github.com/kiln-project/kiln/assets/installconfig/types/machines"
	"github.com/kiln-project/kiln/assets/installconfig/types/ssh"
	"github.com/kiln-project/kiln/assets/installconfig/types/ssh/sshconfig"
	"github.com/kiln-project/kiln/cmd/cluster/install"
	"github.com/kiln-project/kiln/cmd/cluster/machineset"
)

// edited returns a copy of c with its hosts changed by edit.
func edited(c *types.Config, edit func(hosts []ssh.Host) []ssh.Host) *types.Config {
	return sshconfig.WithHosts(c, edit(slices.Clone(c.Platform.SSH.Hosts)))
}

// TestHostsChange checks what a scale may change in platform.ssh.hosts:
// hosts added and removed; and that every other change is refused at
// once, each under its path.
func TestHostsChange(t *testing.T) {
	cur := installconfigtest.SSHExample(t)
	swap := edited(cur, func(hs []ssh.Host) []ssh.Host {
		hs[4] = ssh.Host{Name: "node6", Address: "192.168.10.16", Role: ssh.RoleWorker}
		return append(hs, ssh.Host{Name: "node7", Address: "192.168.10.17", Role: ssh.RoleMaster})
	})
	if errs := HostsChange(cur, swap); len(errs) > 0 {
		t.Errorf("a worker swapped and a master added: %v", errs.ToAggregate())
	}
	bad := edited(cur, func(hs []ssh.Host) []ssh.Host {
		hs[0].Name = "node0"                          // the bootstrap host renamed
		hs[1].Address = "192.168.10.22"               // a master moved
		hs[2].Role = ssh.RoleWorker                   // a master demoted
		hs[3].Name = "node9"                          // a new name at node4's address
		hs[4].Role, hs[4].Name = "bootstrap", "node1" // ... and node1 at a worker's
		return hs
	})
	errs := HostsChange(cur, bad)
	var got []string
	for _, e := range errs {
		got = append(got, e.Field)
	}
	want := []string{"platform.ssh.hosts[0]", "platform.ssh.hosts[1].address", "platform.ssh.hosts[2].role", "platform.ssh.hosts[3].name", "platform.ssh.hosts[4]"}
	if !slices.Equal(got, want) {
		t.Errorf("refused %q, want %q:\n%v", got, want, errs.ToAggregate())
	}
	promoted := edited(cur, func(hs []ssh.Host) []ssh.Host {
		hs[0].Role = ssh.RoleWorker
		return hs
	})
	if errs := HostsChange(cur, promoted); len(errs) != 1 || errs[0].Field != "platform.ssh.hosts[0].role" {
		t.Errorf("the bootstrap host turned worker: %v", errs.ToAggregate())
	}
	joins := edited(cur, func(hs []ssh.Host) []ssh.Host {
		hs[0].JoinAsWorker = true
		return hs
	})
	if errs := HostsChange(cur, joins); len(errs) > 0 {
		t.Errorf("the bootstrap host joining as a worker: %v", errs.ToAggregate())
	}
	if errs := HostsChange(joins, cur); len(errs) > 0 {
		t.Errorf("the bootstrap host leaving as a worker: %v", errs.ToAggregate())
	}
	if m, w, err := Counts(cur, joins); err != nil || m != 3 || w != 2 {
		t.Errorf("Counts with the bootstrap host joining = %d, %d, %v; want 3, 2", m, w, err)
	}
	moved := edited(joins, func(hs []ssh.Host) []ssh.Host {
		hs[0].Address = "192.168.10.19"
		return hs
	})
	if errs := HostsChange(cur, moved); len(errs) != 1 || errs[0].Field != "platform.ssh.hosts[0]" {
		t.Errorf("the bootstrap host joining at another address: %v", errs.ToAggregate())
	}
	if errs := HostsChange(testConfig(1, 1), testConfig(3, 1)); len(errs) > 0 {
		t.Errorf("a local cluster: %v", errs.ToAggregate())
	}
}

// TestCountsSSH checks that an ssh cluster's edited install-config may
// change its hosts, within HostsChange, and nothing else but the counts.
func TestCountsSSH(t *testing.T) {
	cur := installconfigtest.SSHExample(t)
	want := edited(cur, func(hs []ssh.Host) []ssh.Host {
		return append(hs, ssh.Host{Name: "node6", Address: "192.168.10.16", Role: ssh.RoleWorker})
	})
	if m, w, err := Counts(cur, want); err != nil || m != 3 || w != 2 {
		t.Errorf("Counts = %d, %d, %v; want 3, 2", m, w, err)
	}
	bad := edited(cur, func(hs []ssh.Host) []ssh.Host {
		hs[1].Address = "192.168.10.22"
		return hs
	})
	bad.Platform.SSH.APIVIP = "192.168.10.99"
	_, _, err := Counts(cur, bad)
	for _, s := range []string{"platform.ssh.apiVIP: Forbidden", "platform.ssh.hosts[1].address: Invalid value"} {
		if err == nil || !strings.Contains(err.Error(), s) {
			t.Errorf("Counts = %v; want it to name %q", err, s)
		}
	}
}

// TestRequestSSH checks that on the ssh platform the machines wanted are
// the hosts of --config, and that the count flags are refused.
func TestRequestSSH(t *testing.T) {
	c := &install.Cluster{}
	c.Config, c.InfraID = installconfigtest.SSHExample(t), infra
	_, err := request(c, Options{Masters: 5, Workers: -1, Remove: []string{"node5"}}, nil)
	if err == nil || !strings.Contains(err.Error(), "--masters, --remove: on platform ssh") {
		t.Errorf("request with --masters and --remove = %v", err)
	}
	want := edited(c.Config, func(hs []ssh.Host) []ssh.Host {
		hs[4] = ssh.Host{Name: "node6", Address: "192.168.10.16", Role: ssh.RoleWorker}
		return hs
	})
	want.PullSecret = redacted
	data, err := yaml.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "install-config.yaml")
	if err := os.WriteFile(file, data, 0o600); err != nil {
		t.Fatal(err)
	}
	req, err := request(c, Options{Config: file, Masters: -1, Workers: -1, Replace: []string{"node3"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if req.Want == nil || !reflect.DeepEqual(*req.Want, machines.Shape{Masters: []string{"node2", "node3", "node4"}, Workers: []string{"node6"}}) {
		t.Errorf("request wants %+v", req.Want)
	}
	if !reflect.DeepEqual(req.Hosts, want.Platform.SSH.Hosts) || !slices.Equal(req.Replace, []string{"node3"}) {
		t.Errorf("request = %+v", req)
	}
}

// TestMakePlanNamed checks a plan to machines named by the install-config:
// the ones not wanted go, the wanted ones missing come, adds before
// removes; a replacement and an unjoined host are planned as with counts.
func TestMakePlanNamed(t *testing.T) {
	cur := machines.Shape{Masters: []string{"node2", "node3", "node4"}, Workers: []string{"node5"}}
	want := machines.Shape{Masters: []string{"node2", "node3", "node4"}, Workers: []string{"node6", "node7"}}
	p, err := MakePlan(infra, cur, Request{Want: &want, Replace: []string{"node4"}}, nil, []string{"node6"})
	if err != nil {
		t.Fatal(err)
	}
	if got, w := planLines(p), acts("~ replace master node4", "+ worker node6", "+ worker node7", "- worker node5"); !slices.Equal(got, w) {
		t.Errorf("actions = %q, want %q", got, w)
	}
	if !reflect.DeepEqual(p.To, want) || !p.Creates() {
		t.Errorf("to = %+v (creates %v), want %+v", p.To, p.Creates(), want)
	}
	// A worker an interrupted run left unjoined is finished first.
	cur.Workers = []string{"node5", "node6"}
	if p, err = MakePlan(infra, cur, Request{Want: &want}, []string{"node5"}, []string{"node6"}); err != nil {
		t.Fatal(err)
	}
	if got, w := planLines(p), acts("> finish joining worker node6", "+ worker node7", "- worker node5"); !slices.Equal(got, w) {
		t.Errorf("actions = %q, want %q", got, w)
	}
	shrink := machines.Shape{Masters: []string{"node2"}}
	if p, err = MakePlan(infra, cur, Request{Want: &shrink}, nil, nil); err != nil {
		t.Fatal(err)
	}
	if got, w := planLines(p), acts("- master node3", "- master node4", "- worker node5", "- worker node6"); !slices.Equal(got, w) || p.Creates() {
		t.Errorf("actions = %q (creates %v), want %q", got, p.Creates(), w)
	}

	even := machines.Shape{Masters: []string{"node2", "node3"}, Workers: []string{"node5"}}
	_, err = MakePlan(infra, cur, Request{Want: &even, Remove: []string{"node5"}, Replace: []string{"node4"}}, []string{"node5"}, nil)
	for _, s := range []string{
		"controlPlane.replicas: Unsupported value: 2",
		"--remove: Forbidden",
		`platform.ssh.hosts: Invalid value: "node5": an interrupted scale is removing it`,
		`--replace[0]: Invalid value: "node4": not a master wanted`,
	} {
		if err == nil || !strings.Contains(err.Error(), s) {
			t.Errorf("MakePlan = %v; want it to name %q", err, s)
		}
	}
}

// TestUnionHosts checks the hosts a scale runs on: the wanted ones, then
// those it removes.
func TestUnionHosts(t *testing.T) {
	a := []ssh.Host{{Name: "n1"}, {Name: "n2"}, {Name: "n3"}}
	b := []ssh.Host{{Name: "n1"}, {Name: "n4"}}
	got := unionHosts(a, b)
	if want := []ssh.Host{{Name: "n1"}, {Name: "n4"}, {Name: "n2"}, {Name: "n3"}}; !reflect.DeepEqual(got, want) {
		t.Errorf("unionHosts = %+v, want %+v", got, want)
	}
	// The bootstrap host leaving as a worker is one until the scale
	// resets it; joining, it is one already.
	joined := []ssh.Host{{Name: "n0", Role: ssh.RoleBootstrap, JoinAsWorker: true}}
	left := []ssh.Host{{Name: "n0", Role: ssh.RoleBootstrap}}
	for _, tc := range [][2][]ssh.Host{{joined, left}, {left, joined}} {
		if got := unionHosts(tc[0], tc[1]); len(got) != 1 || !got[0].JoinAsWorker {
			t.Errorf("unionHosts(%+v, %+v) = %+v; want the bootstrap host a worker", tc[0], tc[1], got)
		}
	}
}

// TestSettleHosts checks that once a scale is done the hosts record keeps
// the bootstrap host's entry and the hosts of the shape, in order, and
// that a cluster whose hosts no scale changed gets no record.
func TestSettleHosts(t *testing.T) {
	c := &install.Cluster{}
	c.Dir, c.Config, c.InfraID = t.TempDir(), installconfigtest.SSHExample(t), infra
	if err := settleHosts(c); err != nil {
		t.Fatal(err)
	}
	if _, found, err := machineset.LoadHosts(c.Dir); found || err != nil {
		t.Fatalf("a record without a scale: %v, %v", found, err)
	}
	union := append(slices.Clone(c.Config.Platform.SSH.Hosts), ssh.Host{Name: "node6", Address: "192.168.10.16", Role: ssh.RoleWorker})
	if err := machineset.SaveHosts(c.Dir, union); err != nil {
		t.Fatal(err)
	}
	c.Config = sshconfig.WithHosts(c.Config, union)
	c.Shape = machines.Shape{Masters: []string{"node2", "node3", "node4"}, Workers: []string{"node6"}}
	if err := settleHosts(c); err != nil {
		t.Fatal(err)
	}
	hosts, _, err := machineset.LoadHosts(c.Dir)
	var got []string
	for _, h := range hosts {
		got = append(got, h.Name)
	}
	if want := []string{"node1", "node2", "node3", "node4", "node6"}; err != nil || !slices.Equal(got, want) {
		t.Errorf("hosts after the scale %q, %v; want %q", got, err, want)
	}
	if c.Config.WorkerReplicas() != 1 || len(c.Config.Platform.SSH.Hosts) != 5 {
		t.Errorf("the cluster's config after: %+v", c.Config.Platform.SSH.Hosts)
	}
	// The bootstrap host joins as a worker after the scale exactly when
	// the shape has it: the union had it join while it left.
	for _, workers := range [][]string{{"node1", "node6"}, {"node6"}} {
		c.Config.Platform.SSH.Hosts[0].JoinAsWorker = true
		c.Shape.Workers = workers
		if err := settleHosts(c); err != nil {
			t.Fatal(err)
		}
		hosts, _, err := machineset.LoadHosts(c.Dir)
		if joins := len(workers) == 2; err != nil || hosts[0].JoinAsWorker != joins || c.Config.WorkerReplicas() != len(workers) {
			t.Errorf("workers %q: the bootstrap host's entry %+v (%v), %d worker replicas; want joinAsWorker %v", workers, hosts[0], err, c.Config.WorkerReplicas(), joins)
		}
	}
}
