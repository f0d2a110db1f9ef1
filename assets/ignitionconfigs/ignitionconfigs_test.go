package ignitionconfigs_test

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/coreos/ignition/v2/config/v3_3"
	"github.com/coreos/ignition/v2/config/v3_3/types"
	"github.com/sirupsen/logrus"

	"github.com/kiln-project/kiln/assets/targets"
	"github.com/kiln-project/kiln/graph"
	"github.com/kiln-project/kiln/graph/installdir"
	"github.com/kiln-project/kiln/ignition"
	"github.com/kiln-project/kiln/ignition/nodelayout"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// newDir returns a --dir holding testdata/install-config.yaml.
func newDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	data, err := os.ReadFile("testdata/install-config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "install-config.yaml"), data, 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

func persist(t *testing.T, dir string, target graph.Target) *bytes.Buffer {
	t.Helper()
	var logs bytes.Buffer
	log := logrus.New()
	log.SetOutput(&logs)
	store, err := graph.Open(dir, graph.WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Persist(context.Background(), target); err != nil {
		t.Fatalf("%s: %v", target.Name, err)
	}
	return &logs
}

func parse(t *testing.T, raw []byte) types.Config {
	t.Helper()
	if err := ignition.Validate(raw); err != nil {
		t.Fatal(err)
	}
	c, _, err := v3_3.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// generatedBootstrap generates the ignition configs of a new directory and
// returns the bootstrap config.
func generatedBootstrap(t *testing.T) types.Config {
	t.Helper()
	return bootstrapIn(t, newDir(t))
}

// bootstrapIn generates the ignition configs of dir and returns the
// bootstrap config.
func bootstrapIn(t *testing.T, dir string) types.Config {
	t.Helper()
	persist(t, dir, targets.IgnitionConfigs())
	raw, err := os.ReadFile(filepath.Join(dir, "bootstrap.ign"))
	if err != nil {
		t.Fatal(err)
	}
	return parse(t, raw)
}

// editInstallConfig replaces the first old in dir's install-config.yaml
// with new.
func editInstallConfig(t *testing.T, dir, old, new string) {
	t.Helper()
	path := filepath.Join(dir, "install-config.yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), old) {
		t.Fatalf("install-config.yaml has no %q", old)
	}
	if err := os.WriteFile(path, []byte(strings.Replace(string(data), old, new, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
}

// served returns the full config the machine-config server in c serves for role.
func served(t *testing.T, c types.Config, role string) types.Config {
	t.Helper()
	raw, ok, err := ignition.FileContents(c, "/etc/kiln/mcs/"+installdir.Ignition(role))
	if err != nil || !ok {
		t.Fatalf("no served %s config: %v", role, err)
	}
	return parse(t, raw)
}

// everyMachine returns the configs the bootstrap machine's config boot
// gives each kind of machine: its own, and the full configs its
// machine-config server serves the masters and the workers.
func everyMachine(t *testing.T, boot types.Config) map[string]types.Config {
	t.Helper()
	return map[string]types.Config{"bootstrap": boot, "master": served(t, boot, "master"), "worker": served(t, boot, "worker")}
}

// golden compares got with testdata/name, which -update rewrites.
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
		t.Errorf("%s differs (run with -update if intended):\n%s", path, diff(string(want), got))
	}
}

// structure describes a config without its (random) key material.
func structure(name string, c types.Config) string {
	var lines []string
	for _, f := range c.Storage.Files {
		lines = append(lines, fmt.Sprintf("%s file %s %04o", name, f.Path, *f.Mode))
	}
	for _, d := range c.Storage.Directories {
		lines = append(lines, fmt.Sprintf("%s dir %s", name, d.Path))
	}
	for _, u := range c.Systemd.Units {
		enabled := u.Enabled != nil && *u.Enabled
		lines = append(lines, fmt.Sprintf("%s unit %s enabled=%v dropins=%d", name, u.Name, enabled, len(u.Dropins)))
	}
	for _, u := range c.Passwd.Users {
		lines = append(lines, fmt.Sprintf("%s user %s keys=%d", name, u.Name, len(u.SSHAuthorizedKeys)))
	}
	for _, m := range c.Ignition.Config.Merge {
		lines = append(lines, fmt.Sprintf("%s merge %s", name, *m.Source))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n") + "\n"
}

func TestIgnitionConfigs(t *testing.T) {
	dir := newDir(t)
	persist(t, dir, targets.IgnitionConfigs())
	read := func(name string) []byte {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	boot := parse(t, read("bootstrap.ign"))
	master, worker := served(t, boot, "master"), served(t, boot, "worker")
	// Each master serves the worker config too, the same bytes as the bootstrap machine.
	mw, _, _ := ignition.FileContents(master, "/etc/kiln/mcs/worker.ign")
	bw, _, _ := ignition.FileContents(boot, "/etc/kiln/mcs/worker.ign")
	if !bytes.Equal(mw, bw) {
		t.Error("masters serve a different worker config than the bootstrap machine")
	}
	got := structure("bootstrap", boot) + structure("master-full", master) + structure("worker-full", worker) +
		structure("master.ign", parse(t, read("master.ign"))) + structure("worker.ign", parse(t, read("worker.ign")))
	golden(t, "structure.golden", got)
	// Private keys are root-only on every machine.
	for name, c := range map[string]types.Config{"bootstrap": boot, "master": master, "worker": worker} {
		for _, f := range c.Storage.Files {
			if (strings.HasSuffix(f.Path, ".key") || strings.Contains(f.Path, "kubeconfig")) && *f.Mode != 0o600 {
				t.Errorf("%s: %s has mode %04o, want 0600", name, f.Path, *f.Mode)
			}
		}
	}
	// A worker holds no CA key. With pki.renewal Automatic (the default)
	// the masters hold the etcd and front-proxy CA keys for their renewal
	// timer (TestManualRenewalKeepsCAKeysOffMasters: not without).
	for _, p := range []string{"/etc/kubernetes/pki/etcd/ca.key", "/etc/kubernetes/pki/front-proxy-ca.key", "/etc/kubernetes/pki/ca.key"} {
		if _, ok, _ := ignition.FileContents(worker, p); ok {
			t.Errorf("the worker config holds %s", p)
		}
		if _, ok, _ := ignition.FileContents(master, p); !ok {
			t.Errorf("the master config lacks %s, which its renewal timer signs with", p)
		}
	}
	unit, _ := unitContents(master, "kiln-certs-renew.service")
	timer, _ := unitContents(master, "kiln-certs-renew.timer")
	// testdata's leafValidity is the default year: renewBefore 30 days,
	// looked at hourly.
	if !strings.Contains(unit, "ExecStart=/usr/local/bin/kiln node certs-renew --before=720h0m0s") || !strings.Contains(timer, "OnUnitActiveSec=1h0m0s") {
		t.Errorf("the renewal unit or timer:\n%s\n%s", unit, timer)
	}
	motd, _, _ := ignition.FileContents(boot, "/etc/motd")
	if !strings.HasPrefix(string(motd), "This is the bootstrap node; it will be destroyed when the master is fully up.") {
		t.Errorf("motd = %q", motd)
	}
	if info, err := os.Stat(filepath.Join(dir, "bootstrap.ign")); err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("bootstrap.ign holds keys and must be 0600: %v %v", info.Mode(), err)
	}
}

func TestRegenerationIsByteIdentical(t *testing.T) {
	dir := newDir(t)
	persist(t, dir, targets.IgnitionConfigs())
	before := snapshot(t, dir)
	logs := persist(t, dir, targets.IgnitionConfigs())
	after := snapshot(t, dir)
	for name, data := range before {
		if !bytes.Equal(data, after[name]) {
			t.Errorf("%s changed on a second run", name)
		}
	}
	if strings.Contains(logs.String(), "level=warn") {
		t.Errorf("second run warned:\n%s", logs)
	}
}

func TestEditedManifestFlowsIntoBootstrap(t *testing.T) {
	dir := newDir(t)
	persist(t, dir, targets.Manifests())
	path := filepath.Join(dir, "manifests", "11-coredns.yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(data), "cache 30", "cache 60", 1)
	if edited == string(data) {
		t.Fatal("template changed: the edit does not apply")
	}
	if err := os.WriteFile(path, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	logs := persist(t, dir, targets.IgnitionConfigs())
	raw, err := os.ReadFile(filepath.Join(dir, "bootstrap.ign"))
	if err != nil {
		t.Fatal(err)
	}
	got, _, _ := ignition.FileContents(parse(t, raw), "/opt/kiln/manifests/11-coredns.yaml")
	if string(got) != edited {
		t.Errorf("bootstrap.ign carries the generated manifest, not the edited one")
	}
	if !strings.Contains(logs.String(), "11-coredns.yaml") {
		t.Errorf("no log line names the edited file:\n%s", logs)
	}
}

func snapshot(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for _, name := range []string{"bootstrap.ign", "master.ign", "worker.ign", "metadata.json", "auth/kubeconfig"} {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		out[name] = data
	}
	return out
}

func diff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	set := func(l []string) map[string]bool {
		m := map[string]bool{}
		for _, s := range l {
			m[s] = true
		}
		return m
	}
	ws, gs := set(w), set(g)
	var out []string
	for _, s := range w {
		if !gs[s] {
			out = append(out, "- "+s)
		}
	}
	for _, s := range g {
		if !ws[s] {
			out = append(out, "+ "+s)
		}
	}
	return strings.Join(out, "\n")
}

// install-config's proxy reaches containerd on every machine as a drop-in,
// with the cluster's own names and networks added to noProxy,
// written so that systemd reads back exactly the values given: each
// variable double-quoted, and % doubled (systemd expands %-specifiers in
// Environment=, and drops a proxy password's %40 as an unknown one).
func TestProxyDropIn(t *testing.T) {
	tests := []struct {
		name, proxy, want string
	}{
		{
			name:  "plain",
			proxy: "proxy:\n  httpsProxy: http://proxy.example.com:3128\n  noProxy: .cluster.local\n",
			// The user's entries first, then what never goes through a
			// proxy: loopback, the API's internal name, Service names, the
			// pod, Service and machine networks.
			want: `Environment="HTTPS_PROXY=http://proxy.example.com:3128" "NO_PROXY=.cluster.local,localhost,127.0.0.1,` +
				`api-int.demo.example.com,.svc,10.128.0.0/14,172.30.0.0/16,198.51.100.0/24"` + "\n",
		},
		{
			name:  "password with %40",
			proxy: "proxy:\n  httpProxy: 'http://kiln:s3cr%40t@proxy.example.com:3128'\n  httpsProxy: 'http://kiln:100%25%40x@proxy.example.com:3128'\n",
			want: `Environment="HTTPS_PROXY=http://kiln:100%%25%%40x@proxy.example.com:3128" ` +
				`"HTTP_PROXY=http://kiln:s3cr%%40t@proxy.example.com:3128" "NO_PROXY=localhost,127.0.0.1,` +
				`api-int.demo.example.com,.svc,.cluster.local,10.128.0.0/14,172.30.0.0/16,198.51.100.0/24"` + "\n",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := newDir(t)
			path := filepath.Join(dir, "install-config.yaml")
			data, _ := os.ReadFile(path)
			data = append(data, []byte(tc.proxy)...)
			os.WriteFile(path, data, 0o600)
			persist(t, dir, targets.IgnitionConfigs())
			raw, _ := os.ReadFile(filepath.Join(dir, "bootstrap.ign"))
			boot := parse(t, raw)
			for name, c := range everyMachine(t, boot) {
				got := dropInOf(c, "containerd.service", "20-kiln-proxy.conf")
				if !strings.Contains(got, tc.want) {
					t.Errorf("%s: containerd proxy drop-in = %q, want %q", name, got, tc.want)
				}
			}
		})
	}
}

// TestKubeletWaitsForBootstrapRBAC checks that a joining node's kubelet
// starts its TLS bootstrap only once its bootstrap credentials may create a
// CSR, and only while it has no kubeconfig of its own; the bootstrap
// machine's kubelet (which runs the temporary control plane) never waits.
func TestKubeletWaitsForBootstrapRBAC(t *testing.T) {
	boot := generatedBootstrap(t)
	kubelet := func(c types.Config) string {
		for _, u := range c.Systemd.Units {
			if u.Name == "kubelet.service" && u.Contents != nil {
				return *u.Contents
			}
		}
		t.Fatal("no kubelet.service")
		return ""
	}
	wait := "test -e " + nodelayout.KubeletKubeconfig + " || " + nodelayout.KilnBinary + " node await-permission --kubeconfig=" +
		nodelayout.BootstrapKubeconfig + " --timeout=10m create certificatesigningrequests.certificates.k8s.io"
	for name, c := range map[string]types.Config{"master": served(t, boot, "master"), "worker": served(t, boot, "worker")} {
		unit := kubelet(c)
		pre := strings.Index(unit, wait)
		if pre < 0 || pre > strings.Index(unit, "ExecStart=/usr/local/bin/kubelet") || !strings.Contains(unit, "TimeoutStartSec=11min") {
			t.Errorf("%s: kubelet does not wait for its bootstrap RBAC before starting:\n%s", name, unit)
		}
	}
	if unit := kubelet(boot); strings.Contains(unit, "await-permission") {
		t.Errorf("the bootstrap machine's kubelet waits for an API it runs itself:\n%s", unit)
	}
}

// unitContents returns the contents of c's unit name.
func unitContents(c types.Config, name string) (string, bool) {
	for _, u := range c.Systemd.Units {
		if u.Name == name && u.Contents != nil {
			return *u.Contents, true
		}
	}
	return "", false
}

// TestManualRenewalKeepsCAKeysOffMasters: with pki.renewal Manual a
// master gets neither the etcd nor the front-proxy CA key, and no
// renewal timer.
func TestManualRenewalKeepsCAKeysOffMasters(t *testing.T) {
	dir := newDir(t)
	f, err := os.OpenFile(filepath.Join(dir, "install-config.yaml"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("pki:\n  renewal: Manual\n"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	master := served(t, bootstrapIn(t, dir), "master")
	for _, p := range []string{"/etc/kubernetes/pki/etcd/ca.key", "/etc/kubernetes/pki/front-proxy-ca.key"} {
		if _, ok, _ := ignition.FileContents(master, p); ok {
			t.Errorf("the master config holds %s with pki.renewal Manual", p)
		}
	}
	for _, u := range master.Systemd.Units {
		if strings.HasPrefix(u.Name, "kiln-certs-renew") {
			t.Errorf("the master config has unit %s with pki.renewal Manual", u.Name)
		}
	}
}
