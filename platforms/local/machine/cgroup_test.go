package machine

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
)

func readTestdata(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestParseCgroupMounts(t *testing.T) {
	tests := []struct {
		file string
		want []Hierarchy
	}{
		{"mountinfo-hybrid", []Hierarchy{
			{Path: "/sys/fs/cgroup/cpu", Controllers: []string{"cpu"}},
			{Path: "/sys/fs/cgroup/cpuacct", Controllers: []string{"cpuacct"}},
			{Path: "/sys/fs/cgroup/cpuset", Controllers: []string{"cpuset"}},
			{Path: "/sys/fs/cgroup/memory", Controllers: []string{"memory"}},
			{Path: "/sys/fs/cgroup/pids", Controllers: []string{"pids"}},
			{Path: "/sys/fs/cgroup/systemd", Controllers: []string{"name=systemd"}},
			{Path: "/sys/fs/cgroup/unified", Unified: true},
		}},
		{"mountinfo-v2", []Hierarchy{{Path: "/sys/fs/cgroup", Unified: true}}},
		// Co-mounted controllers are one hierarchy; a second mount of the
		// same hierarchy is ignored.
		{"mountinfo-v1-cpu-cpuacct", []Hierarchy{
			{Path: "/sys/fs/cgroup/cpu,cpuacct", Controllers: []string{"cpu", "cpuacct"}},
			{Path: "/sys/fs/cgroup/memory", Controllers: []string{"memory"}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			if got := parseCgroupMounts(readTestdata(t, tt.file)); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestCgroupMode(t *testing.T) {
	hybrid := parseCgroupMounts(readTestdata(t, "mountinfo-hybrid"))
	v2 := []Hierarchy{{Path: "/sys/fs/cgroup", Unified: true, Controllers: []string{"cpuset", "cpu", "io", "memory", "pids"}}}
	v2bare := []Hierarchy{{Path: "/sys/fs/cgroup", Unified: true, Controllers: []string{"hugetlb"}}}
	tests := []struct {
		name   string
		layout CgroupLayout
		want   CgroupMode
	}{
		{"hybrid, no systemd (this project's hosts)", CgroupLayout{Hierarchies: hybrid}, CgroupV1},
		{"hybrid, systemd", CgroupLayout{Hierarchies: hybrid, SystemdPID1: true}, CgroupSystemd},
		{"pure v2, systemd (typical user host)", CgroupLayout{Hierarchies: v2, SystemdPID1: true}, CgroupSystemd},
		{"pure v2, no systemd", CgroupLayout{Hierarchies: v2}, CgroupV2},
		{"v2 without controllers", CgroupLayout{Hierarchies: v2bare}, CgroupNoLimits},
		{"nothing", CgroupLayout{}, CgroupNoLimits},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.layout.Mode()
			if got != tt.want {
				t.Errorf("Mode = %s, want %s", got, tt.want)
			}
			if got.Enforced() != (tt.want != CgroupNoLimits) || got.Describe() == "" {
				t.Errorf("Enforced/Describe of %s", got)
			}
		})
	}
}

func TestLimitFiles(t *testing.T) {
	hybrid := CgroupLayout{Hierarchies: parseCgroupMounts(readTestdata(t, "mountinfo-hybrid"))}
	v2 := CgroupLayout{Hierarchies: []Hierarchy{{Path: "/sys/fs/cgroup", Unified: true}}}
	tests := []struct {
		name   string
		layout CgroupLayout
		mode   CgroupMode
		cpus   float64
		mem    int64
		want   []limitFile
	}{
		{"v1", hybrid, CgroupV1, 2, 1 << 30, []limitFile{
			{"/sys/fs/cgroup/memory/kiln/m0/memory.limit_in_bytes", "1073741824"},
			{"/sys/fs/cgroup/cpu/kiln/m0/cpu.cfs_period_us", "100000"},
			{"/sys/fs/cgroup/cpu/kiln/m0/cpu.cfs_quota_us", "200000"},
		}},
		{"v1 memory only", hybrid, CgroupV1, 0, 512 << 20, []limitFile{
			{"/sys/fs/cgroup/memory/kiln/m0/memory.limit_in_bytes", "536870912"},
		}},
		{"v2", v2, CgroupV2, 0.5, 1 << 30, []limitFile{
			{"/sys/fs/cgroup/kiln/m0/memory.max", "1073741824"},
			{"/sys/fs/cgroup/kiln/m0/cpu.max", "50000 100000"},
		}},
		{"unlimited", v2, CgroupV2, 0, 0, nil},
		{"no limits mode", hybrid, CgroupNoLimits, 2, 1 << 30, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.layout.limitFiles(tt.mode, "m0", tt.cpus, tt.mem); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %v\nwant %v", got, tt.want)
			}
		})
	}
	if got := hybrid.machineCgroups("m0"); !slices.Contains(got, "/sys/fs/cgroup/unified/kiln/m0") || len(got) != 7 {
		t.Errorf("machineCgroups = %q", got)
	}
}

func TestMountsUnder(t *testing.T) {
	mi := readTestdata(t, "mountinfo-hybrid")
	got := mountsUnder(mi, "/var/lib/kiln/machines/m0")
	want := []string{"/var/lib/kiln/machines/m0/root/proc", "/var/lib/kiln/machines/m0/root"}
	if !slices.Equal(got, want) {
		t.Errorf("mountsUnder = %q, want %q (deepest first, not the m01 sibling)", got, want)
	}
	if got := mountsUnder(mi, "/mnt/with space"); !slices.Equal(got, []string{"/mnt/with space"}) {
		t.Errorf("escaped mount point: %q", got)
	}
}

// TestLimitInitCgroup: on a unified hierarchy the limits go into the group
// the machine's init runs in (nspawn's payload, the root of the machine's
// cgroup namespace); where machines get cgroup v1 nothing is written.
func TestLimitInitCgroup(t *testing.T) {
	root := t.TempDir()
	proc, cg := filepath.Join(root, "proc"), filepath.Join(root, "sys/fs/cgroup")
	payload := filepath.Join(cg, "system.slice/kiln-m0.service/payload")
	write := func(f, content string) {
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(payload, "memory.max"), "max\n")
	write(filepath.Join(payload, "cpu.max"), "max 100000\n")
	write(filepath.Join(proc, "42/cgroup"), "0::/system.slice/kiln-m0.service/payload\n")
	v2 := CgroupLayout{Hierarchies: []Hierarchy{{Path: cg, Unified: true}}, SystemdPID1: true}
	if err := v2.limitInitCgroup(context.Background(), proc, 42, limits{CPUs: 1.5, MemoryBytes: 2 << 30}); err != nil {
		t.Fatal(err)
	}
	for file, want := range map[string]string{"memory.max": "2147483648", "cpu.max": "150000 100000"} {
		if got, _ := os.ReadFile(filepath.Join(payload, file)); string(got) != want {
			t.Errorf("%s = %q, want %q", file, got, want)
		}
	}
	hybrid := CgroupLayout{Hierarchies: append(parseCgroupMounts(readTestdata(t, "mountinfo-hybrid")), Hierarchy{Path: cg, Unified: true})}
	write(filepath.Join(payload, "memory.max"), "max\n")
	if err := hybrid.limitInitCgroup(context.Background(), proc, 42, limits{MemoryBytes: 2 << 30}); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(payload, "memory.max")); string(got) != "max\n" {
		t.Errorf("wrote %q on a host that gives machines cgroup v1", got)
	}
}
