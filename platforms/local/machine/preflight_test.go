package machine

import (
	"errors"
	"io/fs"
	"strings"
	"testing"
)

func TestPreflight(t *testing.T) {
	hybrid := CgroupLayout{Hierarchies: []Hierarchy{
		{Path: "/sys/fs/cgroup/memory", Controllers: []string{"memory"}},
		{Path: "/sys/fs/cgroup/cpu", Controllers: []string{"cpu"}},
	}}
	probe := func(euid int, missing string, maxInotify string, used int, layout CgroupLayout) hostProbe {
		return hostProbe{
			euid: func() int { return euid },
			lookPath: func(n string) (string, error) {
				if n == missing {
					return "", errors.New("not found")
				}
				return "/usr/bin/" + n, nil
			},
			readFile: func(p string) ([]byte, error) {
				switch p {
				case "/proc/sys/fs/inotify/max_user_instances":
					return []byte(maxInotify + "\n"), nil
				case "/proc/filesystems":
					return []byte("nodev\tproc\n\text4\nnodev\toverlay\n"), nil
				}
				return nil, fs.ErrNotExist
			},
			cgroups:   func() (CgroupLayout, error) { return layout, nil },
			inotify:   func() int { return used },
			onOverlay: func(p string) bool { return p == "/overlay/state" },
		}
	}
	tests := []struct {
		name     string
		machines int
		probe    hostProbe
		problems []string // substrings, one per expected problem
		mode     CgroupMode
		enforced bool
	}{
		{"ready", 4, probe(0, "", "8192", 20, hybrid), nil, CgroupV1, true},
		{"not root", 1, probe(1000, "", "8192", 0, hybrid), []string{"must run as root"}, CgroupV1, true},
		{"no nspawn", 1, probe(0, "systemd-nspawn", "8192", 0, hybrid), []string{"apt-get install systemd-container"}, CgroupV1, true},
		{"inotify too low", 4, probe(0, "", "128", 20, hybrid),
			[]string{"fs.inotify.max_user_instances is 128, 20 are in use and 4 machines need about 128 more (32 each): run `sysctl -w fs.inotify.max_user_instances=512`"},
			CgroupV1, true},
		{"no limits", 1, probe(0, "", "8192", 0, CgroupLayout{}), nil, CgroupNoLimits, false},
		{"state root on overlayfs", 1, probe(0, "", "8192", 0, hybrid), []string{"/overlay/state is on overlayfs"}, CgroupV1, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := PreflightOptions{Machines: tt.machines}
			if strings.Contains(tt.name, "overlayfs") {
				opts.StateRoot = "/overlay/state"
			}
			r, err := preflight(opts, tt.probe)
			if len(r.Problems) != len(tt.problems) {
				t.Fatalf("problems = %q, want %d", r.Problems, len(tt.problems))
			}
			for i, p := range tt.problems {
				if !strings.Contains(r.Problems[i], p) {
					t.Errorf("problem %q does not say %q", r.Problems[i], p)
				}
			}
			var pe *PreflightError
			if (len(tt.problems) > 0) != errors.As(err, &pe) {
				t.Errorf("err = %v", err)
			}
			if r.Mode != tt.mode || r.LimitsEnforced != tt.enforced {
				t.Errorf("mode %s enforced %v", r.Mode, r.LimitsEnforced)
			}
			if !tt.enforced && len(r.Warnings) == 0 {
				t.Errorf("no warning that limits are not enforced")
			}
		})
	}
}
