package manifests

import (
	"slices"
	"testing"

	"github.com/kiln-project/kiln/assets/installconfig/installconfigtest"
)

// TestCSRApproverDenyFlags: the API's VIP is refused in a serving
// certificate unless it is a machine's own address (an ssh master's,
// without a load balancer), which that machine's kubelet must name; a VIP
// that is a name is refused as a name.
func TestCSRApproverDenyFlags(t *testing.T) {
	local := installconfigtest.Local("10.66.0.1").Config
	if flags := CSRApproverDenyFlags(local); !slices.Contains(flags, "--deny-ip=10.66.0.1") {
		t.Errorf("local: %q, want the VIP refused", flags)
	}
	for _, tc := range []struct {
		vip, want, notWant string
	}{
		{"192.168.10.100", "--deny-ip=192.168.10.100", ""},
		{"192.168.10.12", "", "--deny-ip=192.168.10.12"},
		{"node2", "", "--deny-name=node2"},
		{"api.lb.example.com", "--deny-name=api.lb.example.com", "--deny-ip=api.lb.example.com"},
	} {
		c := installconfigtest.SSHExample(t)
		c.Platform.SSH.APIVIP = tc.vip
		flags := CSRApproverDenyFlags(c)
		if tc.want != "" && !slices.Contains(flags, tc.want) {
			t.Errorf("ssh, apiVIP %s: %q lacks %s", tc.vip, flags, tc.want)
		}
		if tc.notWant != "" && slices.Contains(flags, tc.notWant) {
			t.Errorf("ssh, apiVIP %s: %q has %s", tc.vip, flags, tc.notWant)
		}
	}
}
