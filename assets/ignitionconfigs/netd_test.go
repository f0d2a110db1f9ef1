package ignitionconfigs_test

import (
	"strings"
	"testing"
)

// TestNetdNetworkType checks that install-config's networkType reaches
// kiln-netd on every machine, with the machine's address for the tunnels
// and the Service network to route where a host has no route to it.
func TestNetdNetworkType(t *testing.T) {
	for _, tc := range []struct{ setting, want string }{
		{"", "--network-type=KilnBridge"},
		{"  networkType: KilnVXLAN\n", "--network-type=KilnVXLAN"},
	} {
		dir := newDir(t)
		editInstallConfig(t, dir, "networking:\n", "networking:\n  serviceNetwork: [172.31.0.0/16]\n"+tc.setting)
		boot := bootstrapIn(t, dir)
		for name, c := range everyMachine(t, boot) {
			unit := unitOf(c, "kiln-netd.service")
			for _, flag := range []string{tc.want + " \\\n", "--node-ip=${KILN_NODE_IP} \\\n", "--service-route=172.31.0.0/16 \\\n"} {
				if !strings.Contains(unit, flag) {
					t.Errorf("%s: kiln-netd.service lacks %q:\n%s", name, flag, unit)
				}
			}
		}
	}
}
