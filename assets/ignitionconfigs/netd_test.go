package ignitionconfigs_test

import (
	"strings"
	"testing"

	"github.com/coreos/ignition/v2/config/v3_3/types"
)

// TestNetdNetworkType checks that install-config's networkType reaches
// kiln-netd on every machine, with the machine's address for the tunnels.
func TestNetdNetworkType(t *testing.T) {
	for _, tc := range []struct{ setting, want string }{
		{"", "--network-type=KilnBridge"},
		{"  networkType: KilnVXLAN\n", "--network-type=KilnVXLAN"},
	} {
		dir := newDir(t)
		editInstallConfig(t, dir, "networking:\n", "networking:\n"+tc.setting)
		boot := bootstrapIn(t, dir)
		for name, c := range map[string]types.Config{"bootstrap": boot, "master": served(t, boot, "master"), "worker": served(t, boot, "worker")} {
			unit := unitOf(c, "kiln-netd.service")
			for _, flag := range []string{tc.want + " \\\n", "--node-ip=${KILN_NODE_IP} \\\n"} {
				if !strings.Contains(unit, flag) {
					t.Errorf("%s: kiln-netd.service lacks %q:\n%s", name, flag, unit)
				}
			}
		}
	}
}

// TestNetdEgress checks that networking.egress reaches kiln-netd on every
// machine: NAT with the pod and Service networks, None (the tests') as no
// flag, netd's default.
func TestNetdEgress(t *testing.T) {
	for _, tc := range []struct {
		setting string
		want    bool
	}{
		{"", true},
		{"  egress: None\n", false},
	} {
		dir := newDir(t)
		editInstallConfig(t, dir, "networking:\n", "networking:\n"+tc.setting)
		boot := bootstrapIn(t, dir)
		flag := "--egress=NAT --cluster-network=10.128.0.0/14 --service-network=172.30.0.0/16 \\\n"
		for name, c := range map[string]types.Config{"bootstrap": boot, "master": served(t, boot, "master"), "worker": served(t, boot, "worker")} {
			unit := unitOf(c, "kiln-netd.service")
			if got := strings.Contains(unit, flag); got != tc.want {
				t.Errorf("%s (%q): kiln-netd.service has %q: %v, want %v:\n%s", name, tc.setting, flag, got, tc.want, unit)
			}
			if !tc.want && strings.Contains(unit, "--egress") {
				t.Errorf("%s: a sealed cluster's kiln-netd.service has an --egress flag:\n%s", name, unit)
			}
		}
	}
}
