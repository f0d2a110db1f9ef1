package sshconfig

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kiln-project/kiln/assets/installconfig/types"
	"github.com/kiln-project/kiln/assets/installconfig/types/ssh"
)

// config returns a valid config of 1 bootstrap, 3 masters and 1 worker on
// 192.0.2.0/24, defaults set.
func config() *types.Config {
	three, one := int64(3), int64(1)
	c := &types.Config{
		ControlPlane: &types.MachinePool{Name: "master", Replicas: &three},
		Compute:      []types.MachinePool{{Name: "worker", Replicas: &one}},
		Networking:   &types.Networking{MachineNetwork: []types.MachineNetworkEntry{{CIDR: "192.0.2.0/24"}}},
		Platform: types.Platform{SSH: &ssh.Platform{Hosts: []ssh.Host{
			{Name: "boot", Address: "192.0.2.10", Role: "bootstrap"},
			{Name: "m0", Address: "192.0.2.11", Role: "master"},
			{Name: "m1", Address: "192.0.2.12", Role: "master"},
			{Name: "m2.example.com", Address: "192.0.2.13", Role: "master"},
			{Name: "w0", Address: "192.0.2.20", Role: "worker"},
		}}},
	}
	Config{}.SetDefaults(c)
	return c
}

func TestDefaultsAndValidConfig(t *testing.T) {
	c := config()
	if s := c.Platform.SSH; s.User != "root" || s.Port != 22 {
		t.Errorf("defaults: user %q, port %d", s.User, s.Port)
	}
	if errs := (Config{}).Validate(c, field.NewPath("platform", "ssh")); len(errs) > 0 {
		t.Errorf("a valid config: %v", errs)
	}
	c.Platform.SSH.User, c.Platform.SSH.Port, c.Platform.SSH.Bastion = "ci_user", 2222, "jump.example.com:2200"
	c.Platform.SSH.IdentityFile, c.Platform.SSH.KnownHostsFile, c.Platform.SSH.APIVIP = "/k/id", "/k/known", "192.0.2.100"
	Config{}.SetDefaults(c)
	if c.Platform.SSH.User != "ci_user" || c.Platform.SSH.Port != 2222 {
		t.Errorf("defaults replaced what was set: %+v", c.Platform.SSH)
	}
	if errs := (Config{}).Validate(c, field.NewPath("platform", "ssh")); len(errs) > 0 {
		t.Errorf("a valid config with every field: %v", errs)
	}
}

// TestValidateNamesEveryProblem checks that one bad config reports each
// of its problems under its field's path.
func TestValidateNamesEveryProblem(t *testing.T) {
	c := config()
	s := c.Platform.SSH
	s.User, s.Port, s.IdentityFile, s.KnownHostsFile = "Root", 70000, "id_ed25519", "known"
	s.Bastion, s.APIVIP = "jump:0", "not an address"
	s.Hosts = append(s.Hosts,
		ssh.Host{Name: "m0", Address: "192.0.2.30", Role: "master"},  // name twice
		ssh.Host{Name: "w1", Address: "192.0.2.20", Role: "worker"},  // address twice
		ssh.Host{Name: "W_2", Address: "198.51.100.1", Role: "etcd"}, // bad name, outside, bad role
		ssh.Host{Name: "w3", Address: "127.0.0.1", Role: "worker"},
		ssh.Host{Name: "w4", Address: "2001:db8::1", Role: "bootstrap"},
		ssh.Host{Name: "w5", Address: "192.0.2.25", Role: "worker", JoinAsWorker: true},
	)
	c.SSHKey = "ssh-ed25519 AAAA"
	got := map[string]string{}
	for _, e := range (Config{}).Validate(c, field.NewPath("platform", "ssh")) {
		got[e.Field] += e.Error() + "\n"
	}
	for path, want := range map[string]string{
		"platform.ssh.user":                   "user name",
		"platform.ssh.port":                   "1-65535",
		"platform.ssh.identityFile":           "absolute path",
		"platform.ssh.knownHostsFile":         "absolute path",
		"platform.ssh.bastion":                "port must be 1-65535",
		"platform.ssh.apiVIP":                 "IPv4 address or a DNS name",
		"platform.ssh.hosts[5].name":          "also hosts[1]",
		"platform.ssh.hosts[6].address":       "also hosts[4]",
		"platform.ssh.hosts[7].name":          "hostname",
		"platform.ssh.hosts[7].address":       "networking.machineNetwork (192.0.2.0/24)",
		"platform.ssh.hosts[7].role":          `"etcd"`,
		"platform.ssh.hosts[8].address":       "not loopback",
		"platform.ssh.hosts[9].address":       "IPv4",
		"platform.ssh.hosts[10].joinAsWorker": "only the bootstrap host joins as a worker",
		"platform.ssh.hosts":                  "exactly one host with role bootstrap",
		"sshKey":                              "kiln adds no user",
	} {
		if !strings.Contains(got[path], want) {
			t.Errorf("%s: %q, want it to say %q", path, got[path], want)
		}
	}
	for _, want := range []string{"4 master hosts", "controlPlane.replicas (3)", "4 worker hosts", "compute pools' replicas (1)"} {
		if !strings.Contains(got["platform.ssh.hosts"], want) {
			t.Errorf("platform.ssh.hosts: %q, want it to say %q", got["platform.ssh.hosts"], want)
		}
	}
}

func TestMachineNamesAndAddresses(t *testing.T) {
	c := config()
	m, w := Config{}.MachineNames(c, "infra-x")
	if !slices.Equal(m, []string{"m0", "m1", "m2.example.com"}) || !slices.Equal(w, []string{"w0"}) {
		t.Errorf("MachineNames = %q, %q", m, w)
	}
	a, err := Config{}.MachineAddresses(c, types.Resolved{}, "infra-x", "m1")
	if err != nil || len(a) != 1 || a[0].String() != "192.0.2.12" {
		t.Errorf("MachineAddresses(m1) = %v, %v", a, err)
	}
	for _, name := range []string{"boot", "nope"} {
		if _, err := (Config{}).MachineAddresses(c, types.Resolved{}, "infra-x", name); err == nil {
			t.Errorf("MachineAddresses(%s) found an address", name)
		}
	}
	if got := Hosts(c, ssh.RoleBootstrap); len(got) != 1 || got[0].Name != "boot" {
		t.Errorf("Hosts(bootstrap) = %v", got)
	}
}

// TestBootstrapJoinsAsWorker checks that the bootstrap host with
// joinAsWorker is a worker machine, listed in order, with its address,
// and counted in the compute pools' replicas.
func TestBootstrapJoinsAsWorker(t *testing.T) {
	c := config()
	c.Platform.SSH.Hosts[0].JoinAsWorker = true
	fp := field.NewPath("platform", "ssh")
	if errs := (Config{}).Validate(c, fp); len(errs) != 1 || !strings.Contains(errs[0].Error(), "2 worker hosts") {
		t.Errorf("one worker replica for two workers: %v", errs)
	}
	two := int64(2)
	c.Compute[0].Replicas = &two
	if errs := (Config{}).Validate(c, fp); len(errs) > 0 {
		t.Errorf("two worker replicas: %v", errs)
	}
	if !(Config{}).BootstrapJoinsAsWorker(c) {
		t.Errorf("BootstrapJoinsAsWorker = false")
	}
	m, w := Config{}.MachineNames(c, "infra-x")
	if len(m) != 3 || !slices.Equal(w, []string{"boot", "w0"}) {
		t.Errorf("MachineNames = %q, %q; want the bootstrap host first among the workers", m, w)
	}
	a, err := Config{}.MachineAddresses(c, types.Resolved{}, "infra-x", "boot")
	if err != nil || len(a) != 1 || a[0].String() != "192.0.2.10" {
		t.Errorf("MachineAddresses(boot) = %v, %v", a, err)
	}
}

// TestLoadBalancerIPs: ranges and CIDRs on the hosts' segment are
// accepted; every bad entry is named with why, at once.
func TestLoadBalancerIPs(t *testing.T) {
	c := config()
	c.Platform.SSH.APIVIP = "192.0.2.100"
	c.Platform.SSH.LoadBalancerIPs = []string{"192.0.2.200-192.0.2.210", "192.0.2.224/28"}
	if errs := (Config{}).Validate(c, field.NewPath("platform", "ssh")); len(errs) > 0 {
		t.Errorf("valid ranges: %v", errs)
	}
	c.Platform.SSH.LoadBalancerIPs = []string{
		"192.0.2.210-192.0.2.200", // backwards
		"198.51.100.0/28",         // off the segment
		"192.0.2.5-192.0.2.30",    // holds boot, m0, m1, m2, w0
		"192.0.2.99-192.0.2.101",  // holds apiVIP
		"192.0.2.228/30",          // fine alone
		"192.0.2.230-192.0.2.231", // overlaps the /30
		"192.0.2.240/27",          // host bits
		"192.0.2.248/29",          // broadcast
		"nonsense",
	}
	errs := (Config{}).Validate(c, field.NewPath("platform", "ssh"))
	got := errs.ToAggregate().Error()
	for _, want := range []string{
		"loadBalancerIPs[0]: Invalid value: \"192.0.2.210-192.0.2.200\": the range ends before it starts",
		"loadBalancerIPs[1]: Invalid value: \"198.51.100.0/28\": must be inside one of networking.machineNetwork (192.0.2.0/24)",
		"holds host boot's address 192.0.2.10", "holds host w0's address 192.0.2.20",
		"loadBalancerIPs[3]: Invalid value: \"192.0.2.99-192.0.2.101\": holds apiVIP 192.0.2.100",
		"loadBalancerIPs[5]: Invalid value: \"192.0.2.230-192.0.2.231\": overlaps loadBalancerIPs[4] (192.0.2.228/30)",
		"loadBalancerIPs[6]: Invalid value: \"192.0.2.240/27\": has host bits set: the network is 192.0.2.224/27",
		"loadBalancerIPs[7]: Invalid value: \"192.0.2.248/29\": must leave out 192.0.2.0/24's network and broadcast addresses",
		"loadBalancerIPs[8]: Invalid value: \"nonsense\"",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("errors lack %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "loadBalancerIPs[4]: ") {
		t.Errorf("a valid entry was refused:\n%s", got)
	}
	if r, err := ParseAddrRange("10.0.0.0/8"); err != nil || r.First.String() != "10.0.0.0" || r.Last.String() != "10.255.255.255" {
		t.Errorf("ParseAddrRange(10.0.0.0/8) = %v, %v", r, err)
	}
}

// TestManagedAPIVIP: a free address on the hosts' segment is kiln's to
// announce (and MetalLB runs for it alone); a master's address, a name or
// apiVIPManaged: false is the user's; a VIP kiln cannot announce is
// refused naming the field, every problem at once.
func TestManagedAPIVIP(t *testing.T) {
	no := false
	yes := true
	for _, tc := range []struct {
		vip     string
		managed *bool
		want    string // "" when the user keeps it
	}{
		{vip: "192.0.2.100", want: "192.0.2.100"},
		{vip: "192.0.2.100", managed: &yes, want: "192.0.2.100"},
		{vip: "192.0.2.100", managed: &no},
		{vip: "192.0.2.11"},
		{vip: "m0"},
		{vip: "api.example.com"},
		{},
	} {
		c := config()
		c.Platform.SSH.APIVIP, c.Platform.SSH.APIVIPManaged = tc.vip, tc.managed
		if errs := (Config{}).Validate(c, field.NewPath("platform", "ssh")); len(errs) > 0 {
			t.Errorf("%q managed %v: %v", tc.vip, tc.managed, errs)
		}
		add := Config{}.Addons(c)
		if add.APIVIP != tc.want || add.MetalLB() != (tc.want != "") || add.LoadBalancer {
			t.Errorf("%q managed %v: Addons APIVIP %q, MetalLB %v, LoadBalancer %v; want VIP %q", tc.vip, tc.managed, add.APIVIP, add.MetalLB(), add.LoadBalancer, tc.want)
		}
	}

	for _, tc := range []struct {
		vip     string
		managed *bool
		want    []string
	}{
		{vip: "198.51.100.7", want: []string{`platform.ssh.apiVIP: Invalid value: "198.51.100.7": must be inside one of networking.machineNetwork (192.0.2.0/24)`, "apiVIPManaged: false"}},
		{vip: "192.0.2.255", want: []string{`platform.ssh.apiVIP: Invalid value: "192.0.2.255": is 192.0.2.0/24's network or broadcast address`}},
		{vip: "192.0.2.11", managed: &yes, want: []string{"platform.ssh.apiVIPManaged: Invalid value: true: needs apiVIP to be a free IPv4 address"}},
		{managed: &yes, want: []string{"platform.ssh.apiVIPManaged: Invalid value: true"}},
	} {
		c := config()
		c.Platform.SSH.APIVIP, c.Platform.SSH.APIVIPManaged = tc.vip, tc.managed
		got := (Config{}).Validate(c, field.NewPath("platform", "ssh")).ToAggregate()
		if got == nil {
			t.Errorf("%q managed %v: accepted", tc.vip, tc.managed)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(got.Error(), w) {
				t.Errorf("%q managed %v: errors lack %q:\n%s", tc.vip, tc.managed, w, got)
			}
		}
	}
	// With your own load balancer outside the hosts' segment: yours.
	c := config()
	c.Platform.SSH.APIVIP, c.Platform.SSH.APIVIPManaged = "198.51.100.7", &no
	if errs := (Config{}).Validate(c, field.NewPath("platform", "ssh")); len(errs) > 0 {
		t.Errorf("your own load balancer off the segment: %v", errs)
	}
}

// TestNTPServers: addresses and names are accepted; every bad entry is
// named with why, at once.
func TestNTPServers(t *testing.T) {
	c := config()
	c.Platform.SSH.NTPServers = []string{"192.0.2.1", "ntp.example.com", "2001:db8::123"}
	if errs := (Config{}).Validate(c, field.NewPath("platform", "ssh")); len(errs) > 0 {
		t.Errorf("valid servers: %v", errs)
	}
	c.Platform.SSH.NTPServers = []string{"127.0.0.1", "ntp.example.com", "not a name", "ntp.example.com", "0.0.0.0"}
	got := (Config{}).Validate(c, field.NewPath("platform", "ssh")).ToAggregate().Error()
	for _, want := range []string{
		`ntpServers[0]: Invalid value: "127.0.0.1": must be a time server every host reaches`,
		`ntpServers[2]: Invalid value: "not a name": must be an IP address or a DNS name`,
		`ntpServers[3]: Duplicate value: "ntp.example.com (also ntpServers[1])"`,
		`ntpServers[4]: Invalid value: "0.0.0.0"`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("errors lack %q:\n%s", want, got)
		}
	}
	c.Platform.SSH.NTPServers = nil
	for i := range MaxNTPServers + 1 {
		c.Platform.SSH.NTPServers = append(c.Platform.SSH.NTPServers, fmt.Sprintf("192.0.2.%d", 100+i))
	}
	if got := (Config{}).Validate(c, field.NewPath("platform", "ssh")).ToAggregate(); got == nil || !strings.Contains(got.Error(), "ntpServers: Too many") {
		t.Errorf("%d servers: %v; want too many", MaxNTPServers+1, got)
	}
}
