package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	tfdata "github.com/kiln-project/kiln/data/terraform"
	"github.com/kiln-project/kiln/platforms"
	"github.com/kiln-project/kiln/platforms/lb"
	"github.com/kiln-project/kiln/platforms/local/machine"
	"github.com/kiln-project/kiln/platforms/local/provider"
	tf "github.com/kiln-project/kiln/platforms/terraform"
)

// bridgeAddrs returns the IPv4 addresses with prefix of link name, or nil
// when it does not exist.
func bridgeAddrs(t *testing.T, name string) []string {
	out, err := exec.Command("ip", "-j", "addr", "show", "dev", name).Output()
	if err != nil {
		return nil
	}
	var links []struct {
		AddrInfo []struct {
			Family    string `json:"family"`
			Local     string `json:"local"`
			PrefixLen int    `json:"prefixlen"`
		} `json:"addr_info"`
	}
	if err := json.Unmarshal(out, &links); err != nil {
		t.Fatal(err)
	}
	var addrs []string
	for _, l := range links {
		for _, a := range l.AddrInfo {
			if a.Family == "inet" {
				addrs = append(addrs, fmt.Sprintf("%s/%d", a.Local, a.PrefixLen))
			}
		}
	}
	return append(addrs, "exists")
}

// e2eCacheDir is kiln's cache for the tests that build or reuse the
// engine: KILN_E2E_CACHE_DIR, else the one kiln itself uses.
func e2eCacheDir(t *testing.T) string {
	t.Helper()
	if cache := os.Getenv("KILN_E2E_CACHE_DIR"); cache != "" {
		return cache
	}
	cache, err := platforms.CacheDir(os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	return cache
}

// TestTerraformNetwork applies the local platform's network stage through
// kiln's driver, engine and provider (the kiln binary): the bridge gets the
// gateway address and the load balancer listens on it. With debootstrap it
// also applies the bootstrap stage (a real machine from a minimal rootfs)
// and destroys it alone. Destroy removes everything; a second destroy does
// nothing. The host's ip_forward is left as it was.
func TestTerraformNetwork(t *testing.T) {
	requireMachineHost(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	log := testLogger(t)
	engine, err := tf.EnsureEngine(ctx, tf.BuildOptions{CacheDir: e2eCacheDir(t), Log: log, Progress: platforms.NoProgress{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("engine: %s", engine)
	kiln := buildStaticKiln(t)
	modules, err := tfdata.Platform("local")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	d := tf.NewDriver(tf.DriverOptions{
		Engine: engine, Dir: dir, Modules: modules, Log: log,
		Providers: []tf.Provider{provider.TerraformProvider(kiln, dir)},
	})

	subnet := freeSubnet(t, 66)
	bridge := fmt.Sprintf("kt%d", os.Getpid()%100000)
	machineDir, err := os.MkdirTemp("/var/lib", "kiln-e2e-tf-machines-")
	if err != nil {
		t.Fatal(err)
	}
	defer removeStateRoot(t, machineDir)
	lbDir := t.TempDir()
	vars := tfdata.LocalVars{
		ClusterName: "tfe2e", BaseDomain: "example.test", InfraID: "tfe2e-abcde",
		Bridge: bridge, MachineCIDR: subnet + "0/24", APIVIP: subnet + "1",
		NodeImage: "/nonexistent", KilnBinary: kiln, MachineDir: &machineDir, LBDir: &lbDir,
		BootstrapIgnition: `{"ignition":{"version":"3.3.0"}}`, MasterIgnition: "{}", WorkerIgnition: "{}",
		BootstrapAddress: subnet + "10", BootstrapInLB: true,
		MasterNames: []string{"tfe2e-abcde-master-0"}, MasterAddresses: []string{subnet + "11"},
	}
	forward, _ := os.ReadFile("/proc/sys/net/ipv4/ip_forward")
	destroyAll := func() {
		for _, s := range []string{tf.StageCluster, tf.StageBootstrap, tf.StageNetwork} {
			if err := d.Destroy(context.Background(), s, vars); err != nil {
				t.Errorf("destroy %s: %v", s, err)
			}
		}
	}
	defer func() {
		if bridgeAddrs(t, bridge) != nil {
			destroyAll()
			exec.Command("ip", "link", "del", bridge).Run()
		}
	}()

	start := time.Now()
	if err := d.Apply(ctx, tf.StageNetwork, vars); err != nil {
		t.Fatal(err)
	}
	t.Logf("network stage applied in %s", time.Since(start).Round(100*time.Millisecond))
	if got := strings.Join(bridgeAddrs(t, bridge), " "); got != subnet+"1/24 exists" {
		t.Fatalf("bridge %s addresses: %q, want %s1/24", bridge, got, subnet)
	}
	for _, port := range []string{"6443", "22623"} {
		dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		c, err := clusterDial(dctx, "tcp", net.JoinHostPort(subnet+"1", port))
		cancel()
		if err != nil {
			t.Errorf("load balancer on %s1:%s: %v", subnet, port, err)
			continue
		}
		c.Close()
	}
	proc := lb.Process{Kiln: kiln, ConfigPath: filepath.Join(lbDir, vars.InfraID, "lb.json"),
		PIDFile: filepath.Join(lbDir, vars.InfraID, "lb.pid")}
	if _, err := proc.PID(); err != nil {
		t.Errorf("load balancer process: %v", err)
	}

	t.Run("bootstrap machine", func(t *testing.T) {
		vars := vars
		vars.NodeImage = sshHostRootfs(t)
		if err := d.Apply(ctx, tf.StageBootstrap, vars); err != nil {
			t.Fatal(err)
		}
		m := machine.NewManager(machine.Options{StateRoot: machineDir, Log: log})
		name := vars.InfraID + "-bootstrap"
		if st, err := m.State(ctx, name); err != nil || st != machine.StateRunning {
			t.Fatalf("bootstrap state = %s, %v; want running", st, err)
		}
		if out, err := m.Exec(ctx, name, "cat", "/etc/hosts"); err != nil || !strings.Contains(string(out), "api-int.tfe2e.example.test") {
			t.Errorf("bootstrap /etc/hosts: %q, %v", out, err)
		}
		if err := d.Destroy(ctx, tf.StageBootstrap, vars); err != nil {
			t.Fatal(err)
		}
		if st, err := m.State(ctx, name); err != nil || st != machine.StateAbsent {
			t.Errorf("bootstrap state after destroying its stage = %s, %v; want absent", st, err)
		}
		if bridgeAddrs(t, bridge) == nil {
			t.Errorf("destroying the bootstrap stage removed the bridge")
		}
	})

	if err := d.Destroy(ctx, tf.StageNetwork, vars); err != nil {
		t.Fatal(err)
	}
	if got := bridgeAddrs(t, bridge); got != nil {
		t.Errorf("bridge %s still exists after destroy: %v", bridge, got)
	}
	if _, err := proc.PID(); err == nil {
		t.Errorf("load balancer still runs after destroy")
	}
	if err := d.Destroy(ctx, tf.StageNetwork, vars); err != nil {
		t.Errorf("second destroy: %v", err)
	}
	if after, _ := os.ReadFile("/proc/sys/net/ipv4/ip_forward"); string(after) != string(forward) {
		t.Errorf("ip_forward changed from %q to %q", forward, after)
	}
}
