package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kiln-project/kiln/platforms/local/machine"
)

// TestMachineLifecycle boots two machines from a minimal Debian rootfs on a
// bridge, checks what Create promises (boot, network, limits, files), and
// that Destroy, from a fresh Manager, leaves nothing behind.
func TestMachineLifecycle(t *testing.T) {
	requireMachineHost(t)
	image := sshHostRootfs(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()

	stateRoot, err := os.MkdirTemp("/var/lib", "kiln-e2e-machines-")
	if err != nil {
		t.Fatal(err)
	}
	defer removeStateRoot(t, stateRoot)
	r := machine.ExecRunner{Log: testLogger(t)}
	suffix := fmt.Sprintf("%04x", os.Getpid()&0xffff)
	bridge := "kilne2e" + suffix
	subnet := freeSubnet(t, 7)
	if err := machine.EnsureBridge(ctx, r, bridge, subnet+"1/24"); err != nil {
		t.Fatal(err)
	}
	// Idempotent.
	if err := machine.EnsureBridge(ctx, r, bridge, subnet+"1/24"); err != nil {
		t.Fatalf("second EnsureBridge: %v", err)
	}
	defer func() {
		if err := machine.DeleteBridge(context.Background(), r, bridge); err != nil {
			t.Errorf("DeleteBridge: %v", err)
		}
	}()

	marker := filepath.Join(stateRoot, "marker")
	if err := os.WriteFile(marker, []byte("from-host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	const memLimit = 512 << 20
	names := []string{"e2e" + suffix + "-master-0", "e2e" + suffix + "-worker-0"}
	addrs := []string{subnet + "11", subnet + "21"}
	m := machine.NewManager(machine.Options{StateRoot: stateRoot, Log: testLogger(t)})
	mode, err := m.Mode()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("cgroup mode: %s (%s)", mode, mode.Describe())
	specs := make([]machine.Spec, len(names))
	for i, n := range names {
		specs[i] = machine.Spec{
			Name: n, Image: image, Bridge: bridge, Address: addrs[i] + "/24",
			Hosts:       []machine.HostEntry{{IP: addrs[0], Names: []string{"api-int.e2e.example", "api.e2e.example"}}},
			Ignition:    []byte(`{"ignition":{"version":"3.3.0"}}`),
			Env:         map[string]string{"KILN_NODE_IP": addrs[i], "KILN_NODE_NAME": n, "KILN_ROLE": "test role"},
			CPUs:        1,
			MemoryBytes: memLimit,
			Binds:       []machine.Bind{{Source: marker, Target: "/opt/kiln-e2e/marker", ReadOnly: true}},
		}
	}
	var veths []string
	destroyed := false
	defer func() {
		if t.Failed() {
			for _, n := range names {
				dumpMachine(t, m, stateRoot, n)
			}
		}
		if !destroyed {
			for _, n := range names {
				_ = m.Destroy(context.Background(), n)
			}
		}
	}()

	start := time.Now()
	createAll(t, ctx, m, specs)
	created := time.Since(start)
	for _, n := range names {
		bctx, bcancel := context.WithTimeout(ctx, 2*time.Minute)
		st, err := m.WaitBooted(bctx, n)
		bcancel()
		if err != nil {
			t.Fatalf("machine %s did not boot: %v", n, err)
		}
		t.Logf("machine %s: %s", n, st)
	}
	t.Logf("MEASURE two machines: Create returned after %s, both booted (multi-user) after %s", created.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))

	// Idempotent Create; a different spec is refused.
	if err := m.Create(ctx, specs[0]); err != nil {
		t.Errorf("second Create with the same spec: %v", err)
	}
	changed := specs[0]
	changed.MemoryBytes = 2 * memLimit
	if err := m.Create(ctx, changed); err == nil {
		t.Errorf("Create with a different spec of a running machine succeeded")
	}

	exec := func(name string, argv ...string) string {
		t.Helper()
		out, err := m.Exec(ctx, name, argv...)
		if err != nil {
			t.Errorf("exec %v in %s: %v", argv, name, err)
		}
		return strings.TrimSpace(string(out))
	}
	for i, n := range names {
		other := addrs[1-i]
		if out := exec(n, "ping", "-c", "2", "-W", "2", other); !strings.Contains(out, "2 received") {
			t.Errorf("%s cannot ping %s: %s", n, other, out)
		}
		if out := exec(n, "ping", "-c", "1", "-W", "2", "api-int.e2e.example"); !strings.Contains(out, "1 received") {
			t.Errorf("%s cannot ping api-int by name: %s", n, out)
		}
		if out := exec(n, "ping", "-c", "1", "-W", "2", subnet+"1"); !strings.Contains(out, "1 received") {
			t.Errorf("%s cannot ping the host: %s", n, out)
		}
		if out := exec(n, "ip", "route", "show", "default"); out != "" {
			t.Errorf("%s has a default route: %q", n, out)
		}
		if out := exec(n, "hostname"); out != n {
			t.Errorf("hostname in %s = %q", n, out)
		}
		if out := exec(n, "cat", "/etc/kiln/node.env"); !strings.Contains(out, "KILN_NODE_IP="+addrs[i]) || !strings.Contains(out, `KILN_ROLE="test role"`) {
			t.Errorf("node.env in %s: %q", n, out)
		}
		if out := exec(n, "stat", "-c", "%a", "/var/lib/kiln/ignition/config.ign"); out != "600" {
			t.Errorf("ignition config mode in %s = %q, want 600", n, out)
		}
		if out := exec(n, "cat", "/opt/kiln-e2e/marker"); out != "from-host" {
			t.Errorf("bind mount in %s: %q", n, out)
		}
		if out := exec(n, "cat", "/proc/sys/vm/overcommit_memory"); out != "1" {
			t.Errorf("vm.overcommit_memory in %s = %q, want 1 (shim)", n, out)
		}
		if out := exec(n, "findmnt", "-n", "-o", "FSTYPE", "/var/lib/containerd"); out == "overlay" || out == "" {
			t.Errorf("/var/lib/containerd in %s is on %q, want a plain host directory", n, out)
		}
		var limitFile string
		switch mode {
		case machine.CgroupV1:
			limitFile = "/sys/fs/cgroup/memory/memory.limit_in_bytes"
		case machine.CgroupV2, machine.CgroupSystemd:
			limitFile = "/sys/fs/cgroup/memory.max"
		}
		if limitFile != "" {
			if out := exec(n, "cat", limitFile); out != fmt.Sprint(memLimit) {
				t.Errorf("memory limit seen in %s (%s) = %q, want %d", n, limitFile, out, memLimit)
			}
		}
		if mode == machine.CgroupV1 {
			host, _ := os.ReadFile("/sys/fs/cgroup/memory/kiln/" + n + "/memory.limit_in_bytes")
			quota, _ := os.ReadFile("/sys/fs/cgroup/cpu/kiln/" + n + "/cpu.cfs_quota_us")
			if strings.TrimSpace(string(host)) != fmt.Sprint(memLimit) || strings.TrimSpace(string(quota)) != "100000" {
				t.Errorf("host cgroup of %s: memory %q, cpu quota %q", n, host, quota)
			}
		}
	}
	if host, _ := os.ReadFile("/proc/sys/vm/overcommit_memory"); strings.TrimSpace(string(host)) != "0" && strings.TrimSpace(string(host)) != "2" {
		t.Logf("note: host vm.overcommit_memory is %s", host)
	}

	// Why /var/lib/containerd is a plain host directory: an overlay (what
	// containerd's snapshotter mounts) cannot have its upper directory on
	// the machine's overlayfs root, but can on the bind mount.
	const tryOverlay = `d=$1; mkdir -p $d/l $d/u $d/w $d/m && mount -t overlay overlay -o lowerdir=$d/l,upperdir=$d/u,workdir=$d/w $d/m && umount $d/m`
	if _, err := m.Exec(ctx, names[0], "sh", "-c", tryOverlay, "sh", "/var/lib/containerd/kiln-e2e-ovl"); err != nil {
		t.Errorf("overlay with its upper directory in /var/lib/containerd: %v", err)
	}
	if _, err := m.Exec(ctx, names[0], "sh", "-c", tryOverlay, "sh", "/var/tmp/kiln-e2e-ovl"); err == nil {
		t.Errorf("overlay with its upper directory on the overlayfs root worked; the containerd bind may be unnecessary")
	}

	// A machine whose nspawn process dies is "stopped" (its init and the
	// rest may live on in its cgroup); Create starts it again on its disk.
	if out, err := m.Exec(ctx, names[0], "sh", "-c", "echo kept > /var/lib/kiln-e2e-disk"); err != nil {
		t.Fatalf("writing to the machine's disk: %v %s", err, out)
	}
	info, err := m.Inspect(ctx, names[0])
	if err != nil || info.PID == 0 {
		t.Fatalf("Inspect = %+v, %v", info, err)
	}
	if err := syscall.Kill(info.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		st, _ := m.State(ctx, names[0])
		if st == machine.StateStopped {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("state after killing nspawn = %s, want stopped", st)
		}
	}
	restart := time.Now()
	if err := m.Create(ctx, specs[0]); err != nil {
		t.Fatalf("Create of the stopped machine: %v", err)
	}
	if _, err := m.WaitBooted(ctx, names[0]); err != nil {
		t.Fatalf("restarted machine did not boot: %v", err)
	}
	t.Logf("MEASURE restart of a crashed machine to multi-user: %s", time.Since(restart).Round(time.Millisecond))
	if out := exec(names[0], "cat", "/var/lib/kiln-e2e-disk"); out != "kept" {
		t.Errorf("disk after restart: %q, want kept", out)
	}
	if out := exec(names[0], "ping", "-c", "1", "-W", "2", addrs[1]); !strings.Contains(out, "1 received") {
		t.Errorf("restarted machine cannot ping %s: %s", addrs[1], out)
	}
	if hostProcessAlive(info.Leader) {
		t.Errorf("the crashed machine's old init %d still runs", info.Leader)
	}

	// A fresh Manager (as a later process would) sees and destroys them.
	m2 := machine.NewManager(machine.Options{StateRoot: stateRoot, Log: testLogger(t)})
	list, err := m2.List(ctx, "e2e"+suffix)
	if err != nil || strings.Join(list, ",") != strings.Join(names, ",") {
		t.Errorf("List = %v, %v; want %v", list, err, names)
	}
	var pids []int
	for _, n := range names {
		info, err := m2.Inspect(ctx, n)
		if err != nil || info.State != machine.StateRunning || info.Veth == "" || info.Leader == 0 {
			t.Errorf("Inspect %s = %+v, %v", n, info, err)
		}
		veths = append(veths, info.Veth)
		pids = append(pids, info.PID, info.Leader)
	}
	for _, n := range names {
		start := time.Now()
		if err := m2.Destroy(ctx, n); err != nil {
			t.Errorf("Destroy %s: %v", n, err)
		}
		t.Logf("MEASURE destroy %s: %s", n, time.Since(start).Round(time.Millisecond))
		if st, err := m2.State(ctx, n); err != nil || st != machine.StateAbsent {
			t.Errorf("State %s after Destroy = %s, %v", n, st, err)
		}
		if err := m2.Destroy(ctx, n); err != nil {
			t.Errorf("second Destroy %s: %v", n, err)
		}
	}
	destroyed = true
	for _, pid := range pids {
		if pid > 0 && hostProcessAlive(pid) {
			t.Errorf("process %d still runs", pid)
		}
	}
	if left := leftovers(t, stateRoot, names, veths); len(left) > 0 {
		t.Errorf("left behind after Destroy:\n%s", strings.Join(left, "\n"))
	}
}
