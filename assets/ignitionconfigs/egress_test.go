package ignitionconfigs_test

import (
	"strings"
	"testing"

	"github.com/kiln-project/kiln/assets/tls/tlstest"
)

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
		for name, c := range everyMachine(t, boot) {
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

// TestContainerdTrustsTheBundle checks that containerd on every machine
// trusts install-config's additionalTrustBundle for its pulls, besides the
// system's CAs, exactly when one is given.
func TestContainerdTrustsTheBundle(t *testing.T) {
	for _, tc := range []struct {
		setting string
		want    bool
	}{{"", false}, {"bundle", true}} {
		dir := newDir(t)
		if tc.setting != "" {
			pem := string(tlstest.CA(t).Cert)
			editInstallConfig(t, dir, "networking:\n", "additionalTrustBundle: |\n  "+strings.ReplaceAll(strings.TrimSpace(pem), "\n", "\n  ")+"\nnetworking:\n")
		}
		boot := bootstrapIn(t, dir)
		for name, c := range everyMachine(t, boot) {
			dropIn := dropInOf(c, "containerd.service", "30-kiln-trust.conf")
			want := "Environment=SSL_CERT_DIR=/etc/ssl/certs:/etc/kiln/trust\n"
			if got := strings.Contains(dropIn, want); got != tc.want {
				t.Errorf("%s (%s): containerd's trust drop-in %q has %q: %v, want %v", name, tc.setting, dropIn, want, got, tc.want)
			}
			bundle := false
			for _, f := range c.Storage.Files {
				bundle = bundle || f.Path == "/etc/kiln/trust/additional-trust-bundle.pem"
			}
			if bundle != tc.want {
				t.Errorf("%s (%s): the bundle file is there: %v, want %v", name, tc.setting, bundle, tc.want)
			}
		}
	}
}

// TestKubeletResolvConf checks that every machine's kubelet chooses its
// resolv.conf before it starts (kiln node resolv-conf, into the drop-in
// directory it reads), and starts anyway when that fails.
func TestKubeletResolvConf(t *testing.T) {
	boot := bootstrapIn(t, newDir(t))
	want := "ExecStartPre=-/usr/local/bin/kiln node resolv-conf --config-dir=/run/kiln/kubelet.conf.d\n"
	for name, c := range everyMachine(t, boot) {
		unit := unitOf(c, "kubelet.service")
		i, j := strings.Index(unit, want), strings.Index(unit, "ExecStart=/usr/local/bin/kubelet")
		if i < 0 || j < 0 || i > j || !strings.Contains(unit, "--config-dir=/run/kiln/kubelet.conf.d") {
			t.Errorf("%s: kubelet.service lacks %q before kubelet starts with that --config-dir:\n%s", name, want, unit)
		}
	}
}
