package ignitionconfigs_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/coreos/ignition/v2/config/v3_3/types"
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
			pem := testCAPEM(t)
			editInstallConfig(t, dir, "networking:\n", "additionalTrustBundle: |\n  "+strings.ReplaceAll(strings.TrimSpace(pem), "\n", "\n  ")+"\nnetworking:\n")
		}
		boot := bootstrapIn(t, dir)
		for name, c := range map[string]types.Config{"bootstrap": boot, "master": served(t, boot, "master"), "worker": served(t, boot, "worker")} {
			var dropIn string
			for _, u := range c.Systemd.Units {
				for _, d := range u.Dropins {
					if u.Name == "containerd.service" && d.Name == "30-kiln-trust.conf" && d.Contents != nil {
						dropIn = *d.Contents
					}
				}
			}
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

// testCAPEM returns a self-signed CA certificate in PEM.
func testCAPEM(t *testing.T) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "registry CA"},
		NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}
