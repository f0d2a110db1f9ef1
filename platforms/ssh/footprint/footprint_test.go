package footprint

import (
	"bytes"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/kiln-project/kiln/ignition"
	"github.com/kiln-project/kiln/ignition/nodelayout"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

func config(t *testing.T, butane string) []byte {
	t.Helper()
	c, err := ignition.FromButane("test", []byte("variant: fcos\nversion: 1.4.0\n"+butane))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := ignition.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func TestFromIgnition(t *testing.T) {
	raw := config(t, `
storage:
  directories:
    - path: /var/lib/thing
  files:
    - path: /etc/kubernetes/pki/ca.crt
      contents: {inline: x}
    - path: /etc/motd
      overwrite: true
      contents: {inline: hello}
  links:
    - path: /etc/kiln/current
      target: /etc/kiln/a
systemd:
  units:
    - name: kubelet.service
      enabled: true
      contents: "[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n"
    - name: containerd.service
      dropins:
        - name: 10-kiln.conf
          contents: "[Service]\n"
    - name: kiln-netd.service
      enabled: true
`)
	fp, err := FromIgnition(raw)
	if err != nil {
		t.Fatal(err)
	}
	want := Footprint{
		Paths: []string{
			"/etc/kiln/current",
			"/etc/kubernetes/pki/ca.crt",
			"/etc/motd",
			"/etc/systemd/system/containerd.service.d/10-kiln.conf",
			"/etc/systemd/system/kubelet.service",
			"/var/lib/thing",
		},
		Units: []string{"containerd.service", "kiln-netd.service", "kubelet.service"},
	}
	if !reflect.DeepEqual(fp, want) {
		t.Errorf("FromIgnition =\n%#v\nwant\n%#v", fp, want)
	}
}

func TestFromIgnitionRefusesWhatIsTheOwners(t *testing.T) {
	raw := config(t, `
passwd:
  users:
    - name: core
      ssh_authorized_keys: [ssh-ed25519 AAAA]
storage:
  filesystems:
    - device: /dev/vdb
      format: ext4
      path: /var/lib/etcd
`)
	_, err := FromIgnition(raw)
	if err == nil {
		t.Fatal("FromIgnition accepted a config that adds a user and formats a disk")
	}
	for _, want := range []string{"users or groups", "filesystems", "destroy"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	if _, err := FromIgnition([]byte(`{"ignition":{"version":"9.9.9"}}`)); err == nil {
		t.Error("FromIgnition accepted an invalid config")
	}
}

// TestScripts checks that every script parses and that the values kiln
// sets reach the script as they were, quotes and newlines included.
func TestScripts(t *testing.T) {
	fp := Footprint{Paths: []string{"/etc/motd", "/etc/it's here"}, Units: []string{"kubelet.service"}}
	record := RecordScript(fp, "/var/lib/extensions/kiln-v1")
	proxy := `{"listen":"127.0.0.1","services":[{"name":"it's"}]}` + "\n"
	apply := ApplyScript([]byte(`{"ignition":{"version":"3.3.0"}}`), "KILN_ROLE=master\n", []byte(proxy))
	scripts := map[string]string{
		"record": record,
		"apply":  apply,
		"reset":  ResetScript(),
		"stop":   StopScript(),
		"start":  StartScript(),
	}
	for name, s := range scripts {
		if out, err := exec.Command("/bin/sh", "-n", "-c", s).CombinedOutput(); err != nil {
			t.Errorf("%s script does not parse: %v\n%s", name, err, out)
		}
	}
	head := record[:strings.Index(record, recordScript)]
	out, err := exec.Command("/bin/sh", "-c", head+`printf '%s|%s|%s' "$rec" "$paths" "$units"`).Output()
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(string(out), "|")
	paths := strings.Split(parts[1], "\n")
	for _, want := range append([]string{"/etc/it's here", "/var/lib/extensions/kiln-v1", nodelayout.IgnitionConfigFile, APIProxyUnitFile}, StatePaths...) {
		if !contains(paths, want) {
			t.Errorf("the record script's paths lack %q: %q", want, paths)
		}
	}
	if parts[0] != RecordDir || !strings.Contains(parts[2], "kubelet.service") || !strings.Contains(parts[2], "kiln-ignition.service") ||
		!strings.Contains(parts[2], APIProxyUnit) {
		t.Errorf("the record script's rec and units: %q", parts)
	}
	// The proxy's configuration and unit reach apply as they were.
	head = apply[:strings.Index(apply, applyScript)]
	out, err = exec.Command("/bin/sh", "-c", head+`printf '%s|%s|%s' "$proxy" "$proxy_file" "$proxy_unit_text"`).Output()
	if err != nil {
		t.Fatal(err)
	}
	parts = strings.SplitN(string(out), "|", 3)
	if len(parts) != 3 || parts[0] != proxy || parts[1] != APIProxyConfigFile ||
		!strings.Contains(parts[2], "ExecStart=/usr/local/bin/kiln --dir /var/lib/kiln/api-proxy lb --config "+APIProxyConfigFile+"\n") {
		t.Errorf("apply's proxy values: %q", parts)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestEnvFile(t *testing.T) {
	got, err := envFile(map[string]string{"KILN_ROLE": "master", "KILN_NODE_IP": "10.0.0.11"})
	if err != nil || got != "KILN_NODE_IP=10.0.0.11\nKILN_ROLE=master\n" {
		t.Errorf("envFile = %q, %v", got, err)
	}
	if got, _ := envFile(map[string]string{"A": "$(reboot) x"}); got != `A="\$(reboot) x"`+"\n" {
		t.Errorf("envFile quotes %q", got)
	}
	for _, bad := range []map[string]string{{"A": "x\ny"}, {"A B": "x"}, {"": "x"}, {"A=B": "x"}} {
		if _, err := envFile(bad); err == nil {
			t.Errorf("envFile(%q) accepted", bad)
		}
	}
}

// TestIptablesUndo checks the undo input iptables-undo.awk writes for a
// host whose rules the cluster added to (golden testdata/iptables-undo.txt;
// go test -update rewrites it).
func TestIptablesUndo(t *testing.T) {
	got := undo(t, "testdata/iptables-before.txt", "testdata/iptables-now.txt")
	golden := "testdata/iptables-undo.txt"
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("undo input:\n%s\nwant (%s):\n%s", got, golden, want)
	}
}

func undo(t *testing.T, before, now string) []byte {
	t.Helper()
	in, err := os.Open(now)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	cmd := exec.Command("awk", "-v", "before="+before, iptablesUndo)
	cmd.Stdin = in
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("awk: %v", err)
	}
	return out
}

// TestIptablesUndoRestores loads the before rules into a fresh network
// namespace, the cluster's on top, applies the undo input with
// iptables-restore --noflush and wants iptables-save to show the before
// rules again. Needs root, unshare and iptables.
func TestIptablesUndoRestores(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for a network namespace")
	}
	for _, tool := range []string{"unshare", "iptables-legacy-restore"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skip("needs " + tool)
		}
	}
	dir := t.TempDir()
	abs := func(p string) string { a, _ := filepath.Abs(p); return a }
	script := `set -eu
cd ` + dir + `
iptables-legacy-restore < ` + abs("testdata/iptables-before.txt") + `
iptables-legacy-save | sed -e '/^#/d' -e 's/ \[[0-9]*:[0-9]*\]$//' > before
iptables-legacy-restore < ` + abs("testdata/iptables-now.txt") + `
iptables-legacy-save | sed -e '/^#/d' -e 's/ \[[0-9]*:[0-9]*\]$//' | awk -v before=before "$IPTABLES_UNDO" > undo
iptables-legacy-restore --noflush < undo
iptables-legacy-save | sed -e '/^#/d' -e 's/ \[[0-9]*:[0-9]*\]$//' > after
`
	cmd := exec.Command("unshare", "--net", "/bin/sh", "-c", script)
	cmd.Env = append(os.Environ(), "IPTABLES_UNDO="+iptablesUndo)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	before, _ := os.ReadFile(filepath.Join(dir, "before"))
	after, _ := os.ReadFile(filepath.Join(dir, "after"))
	// A table the cluster loaded stays loaded, empty (legacy iptables
	// cannot unload one); every rule and chain of its own is gone.
	if got := withoutEmptyTables(string(after)); got != withoutEmptyTables(string(before)) {
		undo, _ := os.ReadFile(filepath.Join(dir, "undo"))
		t.Errorf("after the undo:\n%s\nbefore:\n%s\nundo:\n%s", after, before, undo)
	}
}

// TestFirewallResetNftables records the firewall of a host whose owner
// keeps rules of their own (an iptables-nft rule, so a table ip filter
// with only its INPUT chain, and an nftables table), adds what a cluster
// adds (rules in built-in chains iptables-nft had not made, chains of its
// own, a nat table, an nftables table), resets it, and wants nft to list
// the very ruleset of before. Needs root, unshare, nft and iptables-nft.
func TestFirewallResetNftables(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for a network namespace")
	}
	for _, tool := range []string{"unshare", "nft", "iptables-nft", "ip6tables-nft"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skip("needs " + tool)
		}
	}
	dir := t.TempDir()
	script := `set -eu
cd ` + dir + `
eval "$FIREWALL_FNS"
iptables-nft -A INPUT -p tcp --dport 2222 -j ACCEPT
nft add table inet owner
nft add chain inet owner input '{ type filter hook input priority 10; policy accept; }'
nft add rule inet owner input tcp dport 2223 accept
nft list ruleset > before
mkdir rec
record_firewall rec
iptables-nft -N KUBE-FORWARD
iptables-nft -A FORWARD -j KUBE-FORWARD
iptables-nft -A KUBE-FORWARD -m conntrack --ctstate INVALID -j DROP
iptables-nft -A OUTPUT -p udp --dport 53 -j ACCEPT
iptables-nft -A INPUT -p tcp --dport 10250 -j ACCEPT
iptables-nft -t nat -A POSTROUTING -s 10.128.0.0/14 -j MASQUERADE
ip6tables-nft -A FORWARD -j ACCEPT
nft add table ip kube-proxy
nft add chain ip kube-proxy services
reset_firewall rec 2> reset.err
nft list ruleset > after
`
	cmd := exec.Command("unshare", "--net", "/bin/sh", "-c", script)
	cmd.Env = append(os.Environ(), "FIREWALL_FNS="+firewallFns, "iptables_undo="+iptablesUndo)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	before, _ := os.ReadFile(filepath.Join(dir, "before"))
	after, _ := os.ReadFile(filepath.Join(dir, "after"))
	errs, _ := os.ReadFile(filepath.Join(dir, "reset.err"))
	if string(after) != string(before) || len(errs) > 0 {
		t.Errorf("after the reset:\n%s\nbefore:\n%s\nthe reset said: %s", after, before, errs)
	}
	if !strings.Contains(string(before), "tcp dport 2222") || !strings.Contains(string(before), "table inet owner") {
		t.Errorf("the owner's rules are not in the ruleset of before:\n%s", before)
	}
}

// withoutEmptyTables drops the tables with no user-defined chain and no
// rule from iptables-save output.
func withoutEmptyTables(s string) string {
	var out []string
	for _, block := range strings.SplitAfter(s, "COMMIT\n") {
		empty := true
		for _, l := range strings.Split(block, "\n") {
			if strings.HasPrefix(l, "-A ") || (strings.HasPrefix(l, ":") && strings.HasSuffix(l, " -")) {
				empty = false
			}
		}
		if !empty {
			out = append(out, block)
		}
	}
	return strings.Join(out, "")
}

// TestResetFollowsNoLink runs reset.sh's linked on a path below a
// directory that became a symbolic link, and on one that did not.
func TestResetFollowsNoLink(t *testing.T) {
	start := strings.Index(resetScript, "linked() {")
	end := strings.Index(resetScript[start:], "\n}\n")
	if start < 0 || end < 0 {
		t.Fatal("reset.sh has no linked function")
	}
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "real"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "real"), filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	fn := resetScript[start : start+end+3]
	for path, want := range map[string]bool{dir + "/link/kubelet": true, dir + "/real/kubelet": false} {
		err := exec.Command("/bin/sh", "-c", fn+`linked "$1"`, "sh", path).Run()
		if got := err == nil; got != want {
			t.Errorf("linked %s = %v, want %v", path, got, want)
		}
	}
}

// TestSetAPIProxyScript runs the script against files in a temporary
// directory: the configuration replaced where the record and the file
// are, left alone where either is missing or the file is a link.
func TestSetAPIProxyScript(t *testing.T) {
	dir := t.TempDir()
	rec, file := filepath.Join(dir, "rec"), filepath.Join(dir, "lb.json")
	script := func(proxy string) string {
		s := SetAPIProxyScript([]byte(proxy))
		return assign(map[string]string{"rec": rec, "proxy": proxy, "proxy_file": file}) + s[strings.Index(s, putFileFn):]
	}
	run := func(proxy string) string {
		out, err := exec.Command("/bin/sh", "-c", script(proxy)).CombinedOutput()
		if err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		return string(out)
	}
	if out := run(`{"new":1}`); !strings.Contains(out, "no API proxy") {
		t.Errorf("without a record: %q", out)
	}
	if err := os.MkdirAll(rec, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(rec, "recorded"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if out := run(`{"new":1}`); !strings.Contains(out, "no API proxy") {
		t.Errorf("without the file: %q", out)
	}
	if err := os.WriteFile(file, []byte(`{"old":1}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if out := run(`{"new":"it's"}`); !strings.Contains(out, "replaced") {
		t.Errorf("with the file: %q", out)
	}
	if b, _ := os.ReadFile(file); string(b) != `{"new":"it's"}` {
		t.Errorf("the configuration is %q", b)
	}
	target := filepath.Join(dir, "elsewhere")
	os.Remove(file)
	if err := os.Symlink(target, file); err != nil {
		t.Fatal(err)
	}
	run(`{"through":"a link"}`)
	if _, err := os.Stat(target); err == nil {
		t.Error("the script wrote through a link")
	}
	// A link planted at the temporary file put_file writes first.
	os.Remove(file)
	if err := os.WriteFile(file, []byte(`{"old":1}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, file+".tmp"); err != nil {
		t.Fatal(err)
	}
	run(`{"past":"a link"}`)
	if _, err := os.Stat(target); err == nil {
		t.Error("the script wrote through a link at its temporary file")
	}
	if b, _ := os.ReadFile(file); string(b) != `{"past":"a link"}` {
		t.Errorf("the configuration is %q", b)
	}
}
