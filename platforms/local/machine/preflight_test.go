package machine

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestPreflight runs the checks against fake hosts: /proc, /sys, /run and
// /lib/modules trees in testdata/hosts, and the environment, tools, inotify
// use and file systems given here. Every problem is reported at once, each
// named by its check; a host with problems is a *PreflightError.
func TestPreflight(t *testing.T) {
	probe := func(host string, euid int, missing string, used int, env ...string) hostProbe {
		return hostProbe{
			root: filepath.Join("testdata/hosts", host),
			euid: func() int { return euid },
			lookPath: func(n string) (string, error) {
				if n == missing {
					return "", errors.New("not found")
				}
				return "/usr/bin/" + n, nil
			},
			environ:   func() []string { return append([]string{"PATH=/usr/bin", "HOME=/root"}, env...) },
			inotify:   func() int { return used },
			onOverlay: func(p string) bool { return p == "/overlay/state" },
		}
	}
	tests := []struct {
		name     string
		opts     PreflightOptions
		probe    hostProbe
		problems []string // the Check of each problem, in order
		mode     CgroupMode
		warnings []string // a substring of each warning, in order
	}{
		{"CI host: hybrid, no systemd, built-in kernel", PreflightOptions{Machines: 5},
			probe("ci-hybrid", 0, "", 20), nil, CgroupV1, []string{"machines get cgroup v1"}},
		{"Debian 12 after modprobe br_netfilter, tini as PID 1", PreflightOptions{Machines: 3},
			probe("debian12-tini", 0, "", 10), nil, CgroupV2, nil},
		{"Debian 12 in an emulated VM: br_netfilter not loaded", PreflightOptions{Machines: 3, SlowerControlPlane: true},
			probe("debian12", 0, "", 10), []string{CheckKernel + ":br_netfilter"}, CgroupSystemd, nil},
		{"Debian 12 in an emulated VM: standard control-plane timing", PreflightOptions{Machines: 3},
			probe("debian12", 0, "", 10), []string{CheckKernel + ":br_netfilter"}, CgroupSystemd,
			[]string{"CPUs are emulated (AMD QEMU TCG CPU version 2.5+)"}},
		{"Debian 12: every other problem at once", PreflightOptions{Machines: 4, StateRoot: "/overlay/state", SlowerControlPlane: true},
			probe("debian12", 1000, "systemd-nspawn", 20, "SYSTEMD_NSPAWN_USE_CGNS=0", "SYSTEMD_NSPAWN_UNIFIED_HIERARCHY=1", "SYSTEMD_NSPAWN_TMPFS_TMP=0"),
			[]string{CheckRoot, CheckTool + ":systemd-nspawn", CheckKernel + ":br_netfilter",
				CheckEnv + ":SYSTEMD_NSPAWN_UNIFIED_HIERARCHY", CheckEnv + ":SYSTEMD_NSPAWN_USE_CGNS",
				CheckInotify, CheckStateRoot},
			CgroupSystemd, nil},
		{"memory limits above the host's memory", PreflightOptions{Machines: 3, MemoryLimits: []int64{3 << 30, 3 << 30, 3 << 30}},
			probe("debian12-tini", 0, "", 10), nil, CgroupV2, []string{"limits add up to 9216 MiB, more than the host's 7939 MiB"}},
		{"a host that lacks everything", PreflightOptions{Machines: 3},
			probe("bare", 0, "", 10),
			[]string{CheckKernel + ":overlay", CheckKernel + ":bridge", CheckKernel + ":veth",
				CheckKernel + ":ip_set", CheckKernel + ":xt_set", CheckKernel + ":br_netfilter",
				CheckCgroups, CheckMemory},
			CgroupNoLimits, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := preflight(tt.opts, tt.probe)
			var checks []string
			for _, p := range r.Problems {
				checks = append(checks, p.Check)
				if p.Message == "" {
					t.Errorf("problem %s has no message", p.Check)
				}
			}
			if !slices.Equal(checks, tt.problems) {
				t.Errorf("problems %q, want %q\n%v", checks, tt.problems, err)
			}
			var pe *PreflightError
			if (len(tt.problems) > 0) != errors.As(err, &pe) || (pe != nil && !slices.Equal(pe.Problems, r.Problems)) {
				t.Errorf("err = %v", err)
			}
			if r.Mode != tt.mode || r.LimitsEnforced != (tt.mode != CgroupNoLimits) {
				t.Errorf("mode %s, enforced %v; want %s", r.Mode, r.LimitsEnforced, tt.mode)
			}
			if len(r.Warnings) != len(tt.warnings) {
				t.Fatalf("warnings %q, want %d", r.Warnings, len(tt.warnings))
			}
			for i, w := range tt.warnings {
				if !strings.Contains(r.Warnings[i], w) {
					t.Errorf("warning %q does not say %q", r.Warnings[i], w)
				}
			}
		})
	}
}

// TestPreflightFixes: each problem says how to fix it.
func TestPreflightFixes(t *testing.T) {
	p := hostProbe{
		root: "testdata/hosts/debian12", euid: func() int { return 0 },
		lookPath:  func(n string) (string, error) { return "/usr/bin/" + n, nil },
		environ:   func() []string { return []string{"SYSTEMD_NSPAWN_API_VFS_WRITABLE=1"} },
		inotify:   func() int { return 100 },
		onOverlay: func(string) bool { return false },
	}
	r, _ := preflight(PreflightOptions{Machines: 2}, p)
	want := map[string]string{
		CheckKernel + ":br_netfilter":                 "modprobe br_netfilter",
		CheckEnv + ":SYSTEMD_NSPAWN_API_VFS_WRITABLE": "unset SYSTEMD_NSPAWN_API_VFS_WRITABLE",
		CheckInotify: "sysctl -w fs.inotify.max_user_instances=512",
	}
	if len(r.Problems) != len(want) {
		t.Fatalf("problems %v, want %d", r.Problems, len(want))
	}
	for _, pr := range r.Problems {
		if fix, ok := want[pr.Check]; !ok || !strings.Contains(pr.Message, fix) {
			t.Errorf("problem %s: %q does not say %q", pr.Check, pr.Message, fix)
		}
	}
}

// TestPreflightDNSPort: with egress NAT, a server on 0.0.0.0:53 is a
// problem (the machines' DNS forwarder could not listen); one on its own
// addresses, or a sealed cluster, is none.
func TestPreflightDNSPort(t *testing.T) {
	const header = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
	// 127.0.0.53:53 (systemd-resolved), 10.88.0.1:53 (a bridge's dnsmasq);
	// a connected socket from 0.0.0.0:53 is no listener.
	own := header +
		"   0: 3500007F:0035 00000000:0000 0A 00000000:00000000 00:00000000 00000000   101        0 1 1 0000000000000000 100 0 0 10 5\n" +
		"   1: 0100580A:0035 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 2 1 0000000000000000 100 0 0 10 5\n" +
		"   2: 00000000:0035 0100007F:9C40 01 00000000:00000000 00:00000000 00000000     0        0 3 1 0000000000000000 100 0 0 10 5\n"
	wildUDP := header + "  12: 00000000:0035 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 4 2 0000000000000000 0\n"
	wildTCP := header + "   0: 00000000:0035 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 5 1 0000000000000000 100 0 0 10 5\n"
	for _, tc := range []struct {
		name     string
		tcp, udp string
		nat      bool
		want     string // the problem's protocols; "" for none
	}{
		{"servers on their own addresses", own, own, true, ""},
		{"dnsmasq on every address", wildTCP, wildUDP, true, "TCP and UDP"},
		{"UDP only", own, wildUDP, true, "UDP"},
		{"a sealed cluster runs no forwarder", wildTCP, wildUDP, false, ""},
		{"no tables to read", "", "", true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			for name, content := range map[string]string{"tcp": tc.tcp, "udp": tc.udp} {
				if content == "" {
					continue
				}
				if err := os.MkdirAll(filepath.Join(root, "proc/net"), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(root, "proc/net", name), []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			probe := hostProbe{root: root, euid: func() int { return 0 },
				lookPath:  func(n string) (string, error) { return "/usr/bin/" + n, nil },
				environ:   func() []string { return nil },
				inotify:   func() int { return 0 },
				onOverlay: func(string) bool { return false }}
			r, _ := preflight(PreflightOptions{Machines: 1, EgressNAT: tc.nat}, probe)
			var got []Problem
			for _, p := range r.Problems {
				if p.Check == CheckDNSPort {
					got = append(got, p)
				}
			}
			switch {
			case tc.want == "" && len(got) > 0:
				t.Errorf("problems %v, want none", got)
			case tc.want != "" && (len(got) != 1 || got[0].Check != CheckDNSPort || !strings.Contains(got[0].Message, "(0.0.0.0:53, "+tc.want+")") || !strings.Contains(got[0].Message, "bind-interfaces")):
				t.Errorf("problems %v, want one naming %s and the fix", got, tc.want)
			}
		})
	}
}

func TestMeminfo(t *testing.T) {
	text := "MemTotal:        8129764 kB\nMemAvailable:    7806436 kB\nHugePages_Total:       0\n"
	for key, want := range map[string]int64{"MemTotal": 8129764 << 10, "MemAvailable": 7806436 << 10, "HugePages_Total": 0, "MemFree": -1} {
		if got := meminfo(text, key); got != want {
			t.Errorf("meminfo(%s) = %d, want %d", key, got, want)
		}
	}
}
