package preflight

import (
	"context"
	"errors"
	"flag"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// TestScriptOnThisMachine runs the real script here and checks what it
// reports against what Go reads of the same machine.
func TestScriptOnThisMachine(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	before := time.Now()
	out, err := exec.Command("/bin/sh", "-c", Script).Output()
	if err != nil {
		t.Fatalf("the script: %v", err)
	}
	f, err := ParseFacts(out)
	if err != nil {
		t.Fatal(err)
	}
	if host, _ := os.Hostname(); f.Hostname != host {
		t.Errorf("hostname %q, want %q", f.Hostname, host)
	}
	if f.UID != os.Getuid() {
		t.Errorf("uid %d, want %d", f.UID, os.Getuid())
	}
	if port := ln.Addr().(*net.TCPAddr).Port; !f.Listening[port] {
		t.Errorf("port %d, which this test listens on, is not among %v", port, f.Listening)
	}
	if d := f.Clock.Sub(before); d < 0 || d > time.Minute {
		t.Errorf("clock %s is %s from the test's start", f.Clock, d)
	}
	if f.Memory <= 0 || f.VarFree <= 0 {
		t.Errorf("memory %d, /var free %d: want both known", f.Memory, f.VarFree)
	}
	if data, err := os.ReadFile("/etc/machine-id"); err == nil && f.MachineID != strings.TrimSpace(string(data)) {
		t.Errorf("machine-id %q, want %q", f.MachineID, strings.TrimSpace(string(data)))
	}
	for _, m := range modules {
		if s := f.Modules[m.name]; !strings.Contains(" loaded builtin loadable missing unknown ", " "+s+" ") {
			t.Errorf("module %s: %q", m.name, s)
		}
	}
}

// TestParseFactsRefusesGarbage: output that is not the script's is an
// error naming what is missing or unreadable.
func TestParseFactsRefusesGarbage(t *testing.T) {
	for out, want := range map[string]string{
		"sh: 1: syntax error\n":                     "printed no clock",
		"clock=1.5\nuid=root\nhostname=a\n":         `printed "uid=root"`,
		"clock=x\nuid=0\nhostname=a\n":              `printed "clock=x"`,
		"clock=1\nuid=0\nhostname=a\nlisten=zz\n":   `printed "listen=zz"`,
		"clock=1\nuid=0\nhostname=a\nmemorykib=-\n": `printed "memorykib=-"`,
	} {
		if _, err := ParseFacts([]byte(out)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want %q", out, err, want)
		}
	}
}

// now is the clock of the tests' observations.
var now = time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)

// good is what a Debian 12 host ready for kiln reports.
func good(name string) Facts {
	return Facts{
		Clock: now, OSID: "debian", OSVersion: "12", OSName: "Debian GNU/Linux 12 (bookworm)",
		PID1: "systemd", Systemd: 252, CgroupFS: "cgroup2fs", CgroupControllers: []string{"cpuset", "cpu", "io", "memory", "pids"},
		Kernel: "6.1.0-28-amd64", OverlayFS: true, Listening: map[int]bool{22: true},
		Modules: map[string]string{"overlay": "loaded", "bridge": "loadable", "veth": "loadable", "br_netfilter": "loadable",
			"nf_conntrack": "loaded", "ip_set": "loadable", "xt_set": "loadable"},
		Hostname: name, MachineID: strings.Repeat(name[len(name)-1:], 32), NTP: []string{"systemd-timesyncd"},
		Tools: map[string]bool{"iptables": true}, Memory: 4 << 30, VarFree: 40 << 30,
	}
}

func hosts() []Host {
	return []Host{
		{Name: "boot-0", Address: "10.0.0.10", Role: Bootstrap},
		{Name: "master-1", Address: "10.0.0.11", Role: Master},
		{Name: "master-2", Address: "10.0.0.12", Role: Master},
		{Name: "worker-3", Address: "10.0.0.13", Role: Worker},
	}
}

// observed is a fleet of good hosts with change applied to host i's facts.
func observed(changes map[int]func(*Observation)) []Observation {
	var obs []Observation
	for i, h := range hosts() {
		o := Observation{Facts: good(h.Name), Before: now.Add(-time.Second / 2), After: now.Add(time.Second / 2)}
		if c := changes[i]; c != nil {
			c(&o)
		}
		obs = append(obs, o)
	}
	return obs
}

func TestCheck(t *testing.T) {
	for _, tt := range []struct {
		name    string
		changes map[int]func(*Observation)
		// want are the problems as "host check", in order; warn the
		// warnings' host names.
		want, warn []string
	}{
		{name: "four Debian 12 hosts ready"},
		{name: "Ubuntu, not root, no systemd", changes: map[int]func(*Observation){1: func(o *Observation) {
			o.Facts.OSID, o.Facts.OSVersion, o.Facts.OSName = "ubuntu", "24.04", "Ubuntu 24.04 LTS"
			o.Facts.UID, o.Facts.PID1, o.Facts.Systemd = 1000, "tini", 0
		}}, want: []string{"master-1 os", "master-1 root", "master-1 systemd"}},
		{name: "an old systemd and cgroup v2 without memory", changes: map[int]func(*Observation){0: func(o *Observation) {
			o.Facts.Systemd, o.Facts.CgroupControllers = 247, []string{"cpu", "pids"}
		}}, want: []string{"boot-0 systemd", "boot-0 cgroups"}},
		{name: "cgroup v1 is a warning", changes: map[int]func(*Observation){3: func(o *Observation) { o.Facts.CgroupFS = "tmpfs" }},
			warn: []string{"worker-3"}},
		{name: "modules missing; br_netfilter built in shows as /proc/sys/net/bridge", changes: map[int]func(*Observation){2: func(o *Observation) {
			o.Facts.Modules["ip_set"], o.Facts.Modules["br_netfilter"], o.Facts.BridgeNetfilter = "missing", "missing", true
			o.Facts.Modules["overlay"], o.Facts.OverlayFS = "missing", false
		}}, want: []string{"master-2 kernel", "master-2 kernel"}},
		{name: "module lists unreadable: nothing claimed missing", changes: map[int]func(*Observation){2: func(o *Observation) {
			for m := range o.Facts.Modules {
				o.Facts.Modules[m] = "unknown"
			}
		}}},
		{name: "ports busy by role: 6443 matters on a master, not on a worker", changes: map[int]func(*Observation){
			1: func(o *Observation) { o.Facts.Listening[6443], o.Facts.Listening[2379] = true, true },
			3: func(o *Observation) { o.Facts.Listening[6443], o.Facts.Listening[10250] = true, true },
		}, want: []string{"master-1 port", "master-1 port", "worker-3 port"}},
		{name: "clocks ahead and behind", changes: map[int]func(*Observation){
			0: func(o *Observation) { o.Facts.Clock = now.Add(3 * time.Second) },
			2: func(o *Observation) { o.Facts.Clock = now.Add(-2 * time.Second) },
			3: func(o *Observation) { o.Facts.Clock, o.Facts.NTP = now.Add(1200*time.Millisecond), nil },
		}, want: []string{"boot-0 clock", "master-2 clock"}, warn: []string{"worker-3"}},
		{name: "a cloned host: same hostname and machine-id", changes: map[int]func(*Observation){
			2: func(o *Observation) { o.Facts.Hostname, o.Facts.MachineID = "master-1", strings.Repeat("1", 32) },
		}, want: []string{"master-1 hostname", "master-1 machine-id", "master-2 name", "master-2 hostname", "master-2 machine-id"}},
		{name: "a host listed under another name than its hostname", changes: map[int]func(*Observation){
			3: func(o *Observation) { o.Facts.Hostname = "worker-3.example.com" },
		}, want: []string{"worker-3 name"}},
		{name: "the API proxy's ports busy on any role", changes: map[int]func(*Observation){
			3: func(o *Observation) { o.Facts.Listening[6444], o.Facts.Listening[22624] = true, true },
		}, want: []string{"worker-3 port", "worker-3 port"}},
		{name: "small hosts and swap", changes: map[int]func(*Observation){
			1: func(o *Observation) { o.Facts.Memory, o.Facts.Swap = 1536<<20, 1 },
			3: func(o *Observation) { o.Facts.Memory, o.Facts.VarFree = 1536<<20, 2<<30 },
		}, want: []string{"master-1 memory", "worker-3 disk"}, warn: []string{"master-1"}},
		{name: "no iptables; docker and a kubelet installed; a host of another cluster", changes: map[int]func(*Observation){
			1: func(o *Observation) { o.Facts.Tools = map[string]bool{} },
			2: func(o *Observation) {
				o.Facts.Clashes = []string{"/usr/bin/dockerd", "/usr/bin/kubelet", "docker.service"}
			},
			3: func(o *Observation) { o.Facts.Payloads = []string{"/var/lib/extensions/kiln-v1.36.3"} },
		}, want: []string{"master-1 package", "master-2 clash", "master-2 clash", "master-2 clash", "worker-3 payload"}},
		{name: "an unreachable host and a cloned one: both, once each", changes: map[int]func(*Observation){
			0: func(o *Observation) { o.Err = errors.New("dial tcp 10.0.0.10:22: connect: no route to host") },
			3: func(o *Observation) { o.Facts.Hostname = "boot-0" },
		}, want: []string{"boot-0 reach", "worker-3 name"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			warnings, err := Check(hosts(), observed(tt.changes), nil)
			var got []string
			if err != nil {
				var e *Error
				if !errors.As(err, &e) {
					t.Fatalf("error %T %v, want *Error", err, err)
				}
				for _, p := range e.Problems {
					got = append(got, p.Host.Name+" "+p.Check)
				}
			}
			if strings.Join(got, "; ") != strings.Join(tt.want, "; ") {
				t.Errorf("problems %q, want %q\n%v", got, tt.want, err)
			}
			var warned []string
			for _, w := range warnings {
				warned = append(warned, w[:strings.Index(w, " ")])
			}
			if strings.Join(warned, "; ") != strings.Join(tt.warn, "; ") {
				t.Errorf("warnings %q, want from %q", warnings, tt.warn)
			}
		})
	}
}

// TestErrorMessage: every problem of every host, grouped under the host,
// with its fix (testdata/error.golden; -update rewrites it).
func TestErrorMessage(t *testing.T) {
	_, err := Check(hosts(), observed(map[int]func(*Observation){
		0: func(o *Observation) {
			o.Err = errors.New("running the preflight script: ssh: handshake failed: ssh: unable to authenticate")
		},
		1: func(o *Observation) { o.Facts.Clock, o.Facts.Listening[2380] = now.Add(-90*time.Second), true },
		3: func(o *Observation) {
			o.Facts.OSName, o.Facts.OSVersion, o.Facts.Modules["xt_set"] = "Debian GNU/Linux 11 (bullseye)", "11", "missing"
		},
	}), map[Host]string{{Name: "master-9", Address: "10.0.0.19", Role: Master}: good("worker-3").MachineID})
	if err == nil {
		t.Fatal("no error")
	}
	golden := filepath.Join("testdata", "error.golden")
	if *update {
		if err := os.WriteFile(golden, []byte(err.Error()+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, rerr := os.ReadFile(golden)
	if rerr != nil {
		t.Fatal(rerr)
	}
	if err.Error()+"\n" != string(want) {
		t.Errorf("message:\n%s\nwant:\n%s", err, want)
	}
}

// scriptRunner answers the script as fake hosts would, by address; a
// host it does not know refuses the connection.
type scriptRunner map[string]string

func (r scriptRunner) RunScript(_ context.Context, address, script string) ([]byte, error) {
	if script != Script {
		return nil, errors.New("not the preflight script")
	}
	out, ok := r[address]
	if !ok {
		return nil, errors.New("connection refused")
	}
	return []byte(out), nil
}

// TestObserve: every host is asked at once and its answer lands at its
// index, with the clock window around it; an unreachable host is an error.
func TestObserve(t *testing.T) {
	hs := hosts()
	run := scriptRunner{}
	for i, h := range hs[:3] {
		run[h.Address] = "clock=" + strconv.FormatInt(now.Unix(), 10) + ".5\nuid=0\nhostname=" + h.Name + "\nlisten=" + strconv.FormatInt(int64(6443+i), 16) + "\n"
	}
	tick := now
	obs := Observe(context.Background(), hs, run, func() time.Time { return tick })
	for i, o := range obs[:3] {
		if o.Err != nil || o.Facts.Hostname != hs[i].Name || !o.Facts.Listening[6443+i] || !o.Facts.Clock.Equal(now.Add(time.Second/2)) {
			t.Errorf("host %d: %+v", i, o)
		}
		if !o.Before.Equal(now) || !o.After.Equal(now) {
			t.Errorf("host %d: window %s..%s", i, o.Before, o.After)
		}
	}
	if o := obs[3]; o.Err == nil || !strings.Contains(o.Err.Error(), "connection refused") {
		t.Errorf("unreachable host: %v", o.Err)
	}
}

// TestMachineIDs: the installed hosts' machine-ids are taken from their
// observations, a host that did not answer left out, and a host to
// install with one of them is a problem naming the installed host.
func TestMachineIDs(t *testing.T) {
	hs := hosts()
	facts := "clock=" + strconv.FormatInt(now.Unix(), 10) + "\nuid=0\nhostname=master\nmachineid="
	run := scriptRunner{"10.0.0.11": facts + "aaa\n", "10.0.0.12": facts + "bbb\n"}
	ids := MachineIDs(hs, Observe(context.Background(), hs, run, time.Now))
	if len(ids) != 2 || ids[hs[1]] != "aaa" || ids[hs[2]] != "bbb" {
		t.Errorf("MachineIDs = %v", ids)
	}
	_, err := Check(hs[3:], observed(map[int]func(*Observation){0: func(o *Observation) { o.Facts.MachineID = "bbb" }})[:1], ids)
	if err == nil || !strings.Contains(err.Error(), `machine-id "bbb" is also that of master-2, in the cluster already`) {
		t.Errorf("a host cloned from an installed one: %v", err)
	}
	if _, err := Check(hs[3:], observed(nil)[3:], ids); err != nil {
		t.Errorf("a host of its own: %v", err)
	}
}

// TestSpeakerPorts: MetalLB's ports matter only on a host whose node runs
// the speaker.
func TestSpeakerPorts(t *testing.T) {
	hs := hosts()
	hs[3].Speaker = true
	obs := observed(map[int]func(*Observation){
		2: func(o *Observation) { o.Facts.Listening[7946] = true },
		3: func(o *Observation) { o.Facts.Listening[7472], o.Facts.Listening[7946] = true, true },
	})
	_, err := Check(hs, obs, nil)
	var e *Error
	if !errors.As(err, &e) || len(e.Problems) != 2 || e.Problems[0].Host.Name != "worker-3" ||
		!strings.Contains(e.Problems[0].Message, "7472") || !strings.Contains(e.Problems[1].Message, "memberlist") {
		t.Errorf("problems %v, want worker-3's ports 7472 and 7946 alone", err)
	}
}

// TestTimeServers: with platform.ssh.ntpServers, a host needs chrony that
// reads kiln's sources directory, or systemd-timesyncd, installed (kiln
// starts it, so none running is no warning then); without them, nothing
// is asked of its NTP client.
func TestTimeServers(t *testing.T) {
	hs := hosts()
	for i := range hs {
		hs[i].TimeServers = true
	}
	obs := observed(map[int]func(*Observation){
		0: func(o *Observation) { o.Facts.NTP, o.Facts.TimeClients = nil, nil },
		1: func(o *Observation) {
			o.Facts.TimeClients, o.Facts.ChronySourceDirs = []string{"chronyd"}, []string{"/run/chrony-dhcp"}
		},
		2: func(o *Observation) {
			o.Facts.NTP, o.Facts.TimeClients, o.Facts.ChronySourceDirs = nil, []string{"chrony", "systemd-timesyncd"}, []string{"/run/chrony-dhcp", ChronySourcesDir}
		},
		3: func(o *Observation) { o.Facts.TimeClients = []string{"systemd-timesyncd"} },
	})
	warnings, err := Check(hs, obs, nil)
	var e *Error
	if !errors.As(err, &e) || len(e.Problems) != 2 ||
		e.Problems[0].Host.Name != "boot-0" || !strings.Contains(e.Problems[0].Message, "none of chrony, chronyd, systemd-timesyncd is installed") ||
		e.Problems[1].Host.Name != "master-1" || !strings.Contains(e.Problems[1].Message, `chronyd reads no /etc/chrony/sources.d`) {
		t.Errorf("problems %v; want boot-0 without a client and master-1's chronyd without the directory", err)
	}
	for _, w := range warnings {
		if strings.Contains(w, "no NTP client runs") {
			t.Errorf("warned of a client kiln starts: %s", w)
		}
	}
	for i := range hs {
		hs[i].TimeServers = false
	}
	if _, err := Check(hs, obs, nil); err != nil {
		t.Errorf("without ntpServers: %v", err)
	}
	// The script asks for the clients kiln gives servers to, in order.
	if loop := "for u in " + strings.Join(TimeClients(), " ") + "; do"; !strings.Contains(Script, loop) {
		t.Errorf("the script lacks %q", loop)
	}
}
