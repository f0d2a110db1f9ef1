package provision

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"

	"github.com/kiln-project/kiln/assets/installconfig/installconfigtest"
	"github.com/kiln-project/kiln/assets/installconfig/types/machines"
	tfdata "github.com/kiln-project/kiln/data/terraform"
	"github.com/kiln-project/kiln/platforms"
	"github.com/kiln-project/kiln/platforms/lb"
	"github.com/kiln-project/kiln/platforms/ssh/footprint"
)

// exampleCluster is the cluster of docs/examples/install-config-ssh.yaml.
func exampleCluster(t *testing.T) *platforms.Cluster {
	t.Helper()
	return &platforms.Cluster{Config: installconfigtest.SSHExample(t), InfraID: "rack-x1y2z", Bootstrap: []byte("b"), Master: []byte("m"), Worker: []byte("w")}
}

func hostList(hs []tfdata.SSHHost) []string {
	var out []string
	for _, h := range hs {
		out = append(out, h.Name+"@"+h.Address)
	}
	return out
}

func TestVars(t *testing.T) {
	c := exampleCluster(t)
	v, err := Vars(c, "/cache/kiln-v1")
	if err != nil {
		t.Fatal(err)
	}
	if v.Bootstrap == nil || v.Bootstrap.Name != "node1" || v.Bootstrap.IP != "192.168.10.11" {
		t.Errorf("bootstrap %+v", v.Bootstrap)
	}
	if got := hostList(v.Masters); !slices.Equal(got, []string{"node2@192.168.10.12", "node3@192.168.10.13", "node4@192.168.10.14"}) {
		t.Errorf("masters %q", got)
	}
	if got := hostList(v.Workers); !slices.Equal(got, []string{"node5@192.168.10.15"}) {
		t.Errorf("workers %q", got)
	}
	if v.SSHUser != "root" || *v.SSHPort != 22 || v.SSHIdentityFile == nil || *v.SSHIdentityFile != "/root/.ssh/id_ed25519" ||
		v.SSHBastion != nil || v.Payload != "/cache/kiln-v1" || v.BootstrapIgnition != "b" || v.MasterIgnition != "m" || v.WorkerIgnition != "w" {
		t.Errorf("vars %+v", v)
	}
	home, _ := os.UserHomeDir()
	if v.SSHKnownHostsFile != home+"/.ssh/known_hosts" {
		t.Errorf("known hosts %q, want the user's own", v.SSHKnownHostsFile)
	}
	// Workers held back: the masters alone. After bootstrap-complete: no
	// bootstrap host.
	c.Shape = machines.Shape{Masters: c.Machines().Masters}
	c.BootstrapDone = true
	v, err = Vars(c, "/cache/kiln-v1")
	if err != nil {
		t.Fatal(err)
	}
	if v.Bootstrap != nil || len(v.Masters) != 3 || len(v.Workers) != 0 {
		t.Errorf("masters only, bootstrap done: %+v", v)
	}
	// The time servers reach every host (null without them), and the
	// preflight asks each host for a client to give them to.
	if v.NTPServers != nil {
		t.Errorf("ntp_servers %q without platform.ssh.ntpServers", v.NTPServers)
	}
	c.Config.Platform.SSH.NTPServers = []string{"192.168.10.1"}
	if v, err = Vars(c, "/cache/kiln-v1"); err != nil || !slices.Equal(v.NTPServers, []string{"192.168.10.1"}) {
		t.Errorf("ntp_servers %q, %v", v.NTPServers, err)
	}
	for _, h := range clusterHosts(c) {
		if !h.TimeServers {
			t.Errorf("the preflight gives %s no time servers", h)
		}
	}
}

// TestBootstrapHostJoinsAsWorker: the bootstrap host with joinAsWorker is
// the bootstrap host until bootstrap-complete, and no worker then (it is
// busy); after it, a worker of the cluster stage, checked as one.
func TestBootstrapHostJoinsAsWorker(t *testing.T) {
	c := exampleCluster(t)
	c.Config.Platform.SSH.Hosts[0].JoinAsWorker = true
	two := int64(2)
	c.Config.Compute[0].Replicas = &two
	if got := c.Machines().Workers; !slices.Equal(got, []string{"node1", "node5"}) {
		t.Fatalf("workers %q, want node1 (the bootstrap host) and node5", got)
	}
	v, err := Vars(c, "/cache/kiln-v1")
	if err != nil {
		t.Fatal(err)
	}
	if v.Bootstrap == nil || v.Bootstrap.Name != "node1" || !slices.Equal(hostList(v.Workers), []string{"node5@192.168.10.15"}) {
		t.Errorf("during bootstrap: bootstrap %+v, workers %q; want node1 the bootstrap host only", v.Bootstrap, hostList(v.Workers))
	}
	if hs := clusterHosts(c); hs[0].Name != "node1" || hs[0].Role != "bootstrap" || len(hs) != 5 {
		t.Errorf("during bootstrap, the preflight's hosts: %+v", hs)
	}
	c.BootstrapDone = true
	if v, err = Vars(c, "/cache/kiln-v1"); err != nil {
		t.Fatal(err)
	}
	if v.Bootstrap != nil || !slices.Equal(hostList(v.Workers), []string{"node1@192.168.10.11", "node5@192.168.10.15"}) {
		t.Errorf("after bootstrap-complete: bootstrap %+v, workers %q; want node1 a worker", v.Bootstrap, hostList(v.Workers))
	}
	if hs := clusterHosts(c); hs[0].Name != "node1" || hs[0].Role != "worker" || len(hs) != 5 {
		t.Errorf("after bootstrap-complete, the preflight's hosts: %+v; want node1 checked as a worker", hs)
	}
	if cfg, err := APIProxyConfig(c.Config, true); err != nil || strings.Contains(cfg, "192.168.10.11") {
		t.Errorf("the proxies after bootstrap-complete: %s, %v; want node1 no backend", cfg, err)
	}
}

func TestAPIProxyConfig(t *testing.T) {
	c := exampleCluster(t)
	data, err := APIProxyConfig(c.Config, false)
	if err != nil {
		t.Fatal(err)
	}
	var cfg lb.Config
	if err := json.Unmarshal([]byte(data), &cfg); err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil || cfg.Listen != "127.0.0.1" || len(cfg.Services) != 2 {
		t.Fatalf("proxy config %+v (%v)", cfg, err)
	}
	api, mcs := cfg.Services[0], cfg.Services[1]
	if api.Port != 6444 || api.Health != lb.CheckHTTPS || api.HealthPath != "/readyz" ||
		!slices.Equal(api.Backends, []string{"192.168.10.11:6443", "192.168.10.12:6443", "192.168.10.13:6443", "192.168.10.14:6443"}) {
		t.Errorf("api %+v", api)
	}
	if mcs.Port != 22624 || mcs.Health != lb.CheckTCP ||
		!slices.Equal(mcs.Backends, []string{"192.168.10.11:22623", "192.168.10.12:22623", "192.168.10.13:22623", "192.168.10.14:22623"}) {
		t.Errorf("machine-config %+v", mcs)
	}
}

// fakeHosts answers scripts by "<address>: <script>", recording each.
type fakeHosts struct {
	out   map[string]string
	calls []string
}

func (f *fakeHosts) RunScript(_ context.Context, address, script string) ([]byte, error) {
	key := address + ": " + strings.TrimSuffix(script, "\n")
	f.calls = append(f.calls, key)
	out, ok := f.out[key]
	if !ok {
		return nil, errors.New("connection refused")
	}
	return []byte(out), nil
}

func TestFailedUnits(t *testing.T) {
	c := exampleCluster(t)
	hosts := clusterHosts(c)
	if len(hosts) != 5 || hosts[0].Name != "node1" || hosts[0].Address != "192.168.10.11" || hosts[4].Name != "node5" || hosts[4].Address != "192.168.10.15" {
		t.Fatalf("hosts %q", hosts)
	}
	const list = "'systemctl' '--failed' '--no-legend' '--plain'"
	f := &fakeHosts{out: map[string]string{
		"192.168.10.11: " + list: "",
		"192.168.10.12: " + list: "kiln-api-proxy.service loaded failed failed kiln: this host's proxy\n",
		"192.168.10.12: 'journalctl' '-u' 'kiln-api-proxy.service' '-n' '1' '--no-pager' '-o' 'cat'": "listen tcp 127.0.0.1:6444: bind: address already in use\n",
		"192.168.10.14: " + list: "",
		"192.168.10.15: " + list: "",
	}}
	got := failedUnits(context.Background(), f, hosts)
	want := []platforms.FailedUnit{{Machine: "node2", Unit: "kiln-api-proxy.service", LastLine: "listen tcp 127.0.0.1:6444: bind: address already in use"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("failed units %+v, want %+v (node3 does not answer: left out)", got, want)
	}
	held := *c
	held.Shape = machines.Shape{Masters: c.Machines().Masters}
	if hosts := clusterHosts(&held); len(hosts) != 4 || hosts[3].Name != "node4" {
		t.Errorf("workers held back: hosts %+v, want the bootstrap host and the masters", hosts)
	}
	c.BootstrapDone = true
	if hosts := clusterHosts(c); len(hosts) != 4 || hosts[0].Name != "node2" {
		t.Errorf("after bootstrap: hosts %q", hosts)
	}
}

// recordedHosts answers a host's state from kiln's record: running for
// the recorded addresses, absent for the others; a host in down does not
// answer.
type recordedHosts struct {
	recorded, down map[string]bool
}

func (r recordedHosts) RunScript(_ context.Context, address, script string) ([]byte, error) {
	switch {
	case r.down[address]:
		return nil, errors.New("no route to host")
	case !strings.Contains(script, footprint.RecordDir):
		return nil, fmt.Errorf("unexpected script %q", script)
	case r.recorded[address]:
		return []byte("running\n"), nil
	}
	return []byte("absent\n"), nil
}

func (recordedHosts) PushDir(context.Context, string, string, string, func(int64)) error {
	return errors.New("not pushed")
}

// TestPreflightSkipsInstalledHosts: a resumed create checks only the hosts
// that keep no record of kiln's install (the others' ports are kiln's
// now); a host that cannot say is checked, so the preflight names it.
func TestPreflightSkipsInstalledHosts(t *testing.T) {
	c := exampleCluster(t)
	f := recordedHosts{recorded: map[string]bool{"192.168.10.11": true, "192.168.10.12": true}, down: map[string]bool{"192.168.10.14": true}}
	p := &Provisioner{Env: platforms.Env{Log: logrus.New()}}
	var got, done []string
	check, installed := p.notInstalled(context.Background(), f, clusterHosts(c))
	for _, h := range check {
		got = append(got, h.Name)
	}
	for _, h := range installed {
		done = append(done, h.Name)
	}
	if !slices.Equal(got, []string{"node3", "node4", "node5"}) || !slices.Equal(done, []string{"node1", "node2"}) {
		t.Errorf("hosts to check %q, want node3, node4 (down) and node5; installed %q, want node1, node2", got, done)
	}
	c.BootstrapDone = true
	if hs := clusterHosts(c); len(hs) != 4 || hs[0].Name != "node2" {
		t.Errorf("after bootstrap-complete, the preflight's hosts: %+v", hs)
	}
}

// TestDropBootstrapBackend: once the bootstrap host is reset, every
// host's proxy is given the masters alone.
func TestDropBootstrapBackend(t *testing.T) {
	c := exampleCluster(t)
	f := &fakeHosts{out: map[string]string{}}
	want, err := APIProxyConfig(c.Config, true)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(want, "192.168.10.11") || !strings.Contains(want, "192.168.10.14:6443") {
		t.Fatalf("the proxy without the bootstrap host: %s", want)
	}
	hosts := []tfdata.SSHHost{{Name: "node2", Address: "192.168.10.12"}, {Name: "node5", Address: "192.168.10.15"}}
	for _, h := range hosts {
		f.out[h.Address+": "+strings.TrimSuffix(footprint.SetAPIProxyScript([]byte(want)), "\n")] = "footprint: API proxy configuration replaced\n"
	}
	p := &Provisioner{Env: platforms.Env{Log: logrus.New(), Progress: platforms.NoProgress{}}}
	if err := p.dropBootstrapBackend(context.Background(), f, c, hosts); err != nil {
		t.Fatalf("%v (asked %q)", err, f.calls)
	}
	if len(f.calls) != 2 {
		t.Errorf("scripts run: %d, want one per host", len(f.calls))
	}
	// A host that does not answer is named; the others still get theirs.
	hosts = append([]tfdata.SSHHost{{Name: "node3", Address: "192.168.10.13"}}, hosts...)
	if err := p.dropBootstrapBackend(context.Background(), f, c, hosts); err == nil || !strings.Contains(err.Error(), "host node3") {
		t.Errorf("a host that does not answer: %v", err)
	}
	// ... unless it is leaving (a master being removed, maybe dead).
	f.calls = nil
	if err := p.setProxies(context.Background(), f, hosts, []string{"node3"}, want); err != nil || len(f.calls) != 3 {
		t.Errorf("a leaving host that does not answer: %v (asked %d hosts)", err, len(f.calls))
	}
}

func (f *fakeHosts) PushDir(context.Context, string, string, string, func(int64)) error {
	return errors.New("not pushed")
}

// TestAPIBackends checks that the masters behind the hosts' API proxies
// are read back from the configuration the cluster stage recorded: by
// name, in its order, without the bootstrap host or a host that is no
// master of the cluster's shape.
func TestAPIBackends(t *testing.T) {
	c := exampleCluster(t)
	withBoot, err := APIProxyConfig(c.Config, false)
	if err != nil {
		t.Fatal(err)
	}
	got, err := apiBackends(c, tfdata.SSHVars{APIProxy: &withBoot})
	if want := []string{"node2", "node3", "node4"}; err != nil || !slices.Equal(got, want) {
		t.Errorf("apiBackends = %q, %v; want %q", got, err, want)
	}
	two, err := proxyConfig(hostAddresses(c, []string{"node4", "node2"}))
	if err != nil {
		t.Fatal(err)
	}
	got, err = apiBackends(c, tfdata.SSHVars{APIProxy: &two})
	if want := []string{"node4", "node2"}; err != nil || !slices.Equal(got, want) {
		t.Errorf("apiBackends = %q, %v; want %q", got, err, want)
	}
	c.Shape = machines.Shape{Masters: []string{"node2", "node3"}, Workers: []string{"node5"}}
	got, err = apiBackends(c, tfdata.SSHVars{APIProxy: &withBoot})
	if want := []string{"node2", "node3"}; err != nil || !slices.Equal(got, want) {
		t.Errorf("apiBackends with node4 out of the shape = %q, %v; want %q", got, err, want)
	}
	if _, err := apiBackends(c, tfdata.SSHVars{}); err == nil {
		t.Error("apiBackends without a proxy configuration: no error")
	}
}

// TestSetPayloads: a host added with another release than the cluster's
// is installed with that release's payload, and keeps it on every later
// apply; a host installed already keeps its payload, whatever the record
// says; the others take the stage's.
func TestSetPayloads(t *testing.T) {
	c := &platforms.Cluster{Releases: map[string]string{"w1": "v1.36.3", "w2": "v1.36.3", "w3": "v1.35.4"}}
	c.Resolved.Release.Kubernetes = "v1.35.4"
	hosts := func(names ...string) []tfdata.SSHHost {
		var hs []tfdata.SSHHost
		for _, n := range names {
			hs = append(hs, tfdata.SSHHost{Name: n})
		}
		return hs
	}
	var asked []string
	payload := func(v string) (string, error) {
		asked = append(asked, v)
		return "/cache/kiln-" + v, nil
	}
	prev := &tfdata.SSHVars{Masters: hosts("m0"), Workers: []tfdata.SSHHost{{Name: "w1"}, {Name: "w9", Payload: "/cache/gone"}}}
	vars := &tfdata.SSHVars{Masters: hosts("m0"), Workers: hosts("w1", "w2", "w3")}
	if err := setPayloads(c, prev, vars, payload); err != nil {
		t.Fatal(err)
	}
	want := []tfdata.SSHHost{{Name: "w1"}, {Name: "w2", Payload: "/cache/kiln-v1.36.3"}, {Name: "w3"}}
	if !reflect.DeepEqual(vars.Workers, want) || vars.Masters[0].Payload != "" || !slices.Equal(asked, []string{"v1.36.3"}) {
		t.Errorf("workers %+v, masters %+v (asked %v); want %+v", vars.Workers, vars.Masters, asked, want)
	}
	again := &tfdata.SSHVars{Masters: hosts("m0"), Workers: hosts("w1", "w2", "w3")}
	if err := setPayloads(c, vars, again, func(string) (string, error) { return "", errors.New("asked again") }); err != nil || !reflect.DeepEqual(again.Workers, want) {
		t.Errorf("a second apply: %+v, %v", again.Workers, err)
	}
	if err := setPayloads(c, nil, &tfdata.SSHVars{Workers: hosts("w2")}, func(string) (string, error) { return "", errors.New("no node image") }); err == nil ||
		!strings.Contains(err.Error(), "the node payload of v1.36.3, which host w2 boots: no node image") {
		t.Errorf("a release without its payload: %v", err)
	}
}
