package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kiln-project/kiln/assets/installconfig/types/local/localconfig"
	"github.com/kiln-project/kiln/graph/installdir"
	"github.com/kiln-project/kiln/platforms/local/machine"
)

// shortLeafValidity is the single-master cluster's pki.leafValidity: long
// enough for every check of TestClusterSingleMaster before it (about 11
// minutes), short enough that they expire while the HA cluster, tested at
// the same time, is still busy.
const shortLeafValidity = 17 * time.Minute

// withShortLeafValidity adds pki.leafValidity (shortLeafValidity, below
// the normal floor with the switch for tests) to dir's install-config.
func withShortLeafValidity(t *testing.T, dir string) {
	t.Helper()
	// Renewal Manual: nothing on the master renews them before they expire
	// (assertManualRenewal).
	appendInstallConfig(t, dir, fmt.Sprintf("pki:\n  leafValidity: %s\n  allowShortLeafValidityForTests: true\n  renewal: Manual\n", shortLeafValidity))
}

// The HA cluster's pki: its masters renew their certificates by
// themselves autoRenewLeafValidity-autoRenewBefore (4 minutes) after they
// were issued (by create manifests), soon after create (assertAutoRenew);
// its certificates in --dir outlive the test.
const (
	autoRenewLeafValidity = 60 * time.Minute
	autoRenewBefore       = 56 * time.Minute
)

// withAutoRenewal adds the HA cluster's pki to dir's install-config.
func withAutoRenewal(t *testing.T, dir string) {
	t.Helper()
	appendInstallConfig(t, dir, fmt.Sprintf("pki:\n  leafValidity: %s\n  renewBefore: %s\n  allowShortLeafValidityForTests: true\n", autoRenewLeafValidity, autoRenewBefore))
}

// assertAutoRenew waits, with a canary writing through the API's address,
// until every master (by address, machine names) serves new certificates
// on every port, which their kiln-certs-renew timers issue once less than
// autoRenewBefore is left: no kiln command runs. The canary sees no error:
// one master at a time (the renewal lock in etcd), and each API server
// leaves the load balancer before it stops. Then the timers are stopped:
// the rest of the test restarts API servers only where it means to.
func assertAutoRenew(t *testing.T, kiln, dir string, masters, names []string) {
	t.Helper()
	before := servedCerts(t, masters)
	var due time.Time
	for _, c := range before {
		if d := c.NotAfter.Add(-autoRenewBefore); due.IsZero() || d.Before(due) {
			due = d
		}
	}
	cn := startCanary(t, adminClient(t, dir), "e2e-auto-renew")
	start := time.Now()
	renewed := func(addr string, c *x509.Certificate) bool {
		old := before[addr]
		return old != nil && c.SerialNumber.Cmp(old.SerialNumber) != 0 && c.NotAfter.After(old.NotAfter)
	}
	t.Logf("automatic renewal due from %s (in %s)", due.UTC().Format(time.TimeOnly), time.Until(due).Round(time.Second))
	deadline := due.Add(10 * time.Minute)
	var left []string
	for {
		left = left[:0]
		for addr := range before {
			if c, err := servedCert(addr); err != nil || !renewed(addr, c) {
				left = append(left, addr)
			}
		}
		if len(left) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Second)
	}
	writes, errs := cn.finish()
	mgr := machine.NewManager(machine.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, name := range names {
		journal, _ := mgr.Exec(ctx, name, "journalctl", "--no-pager", "-o", "short-iso", "-u", "kiln-certs-renew.service")
		if len(left) > 0 {
			t.Logf("%s: kiln-certs-renew.service:\n%s", name, lastLines(string(journal), 30))
		} else if !strings.Contains(string(journal), "holding the cluster's renewal lock") {
			t.Errorf("%s renewed without the cluster's renewal lock:\n%s", name, lastLines(string(journal), 30))
		}
		if out, err := mgr.Exec(ctx, name, "systemctl", "disable", "--now", "kiln-certs-renew.timer"); err != nil {
			t.Errorf("%s: stop the renewal timer: %v\n%s", name, err, out)
		}
	}
	if len(left) > 0 {
		t.Fatalf("not renewed by %s, %s after they were due: %s", deadline.UTC().Format(time.TimeOnly), time.Since(due).Round(time.Second), strings.Join(left, ", "))
	}
	t.Logf("MEASURE automatic renewal: every master renewed %s after it was due (%s after the canary started); canary: %d writes, %d failed",
		time.Since(due).Round(time.Second), time.Since(start).Round(time.Second), writes, len(errs))
	if start.After(due.Add(time.Minute)) {
		t.Logf("create took longer than the certificates' first %s: some renewals may have happened before the canary started", autoRenewLeafValidity-autoRenewBefore)
	}
	if len(errs) > 0 {
		t.Errorf("the canary saw %d failed writes of %d during the automatic renewal, want none: %v", len(errs), writes, errs)
	}
	after := servedCerts(t, masters)
	for addr, c := range after {
		if old := before[addr]; old != nil && c.NotAfter.Sub(c.NotBefore) != old.NotAfter.Sub(old.NotBefore) {
			t.Errorf("%s: renewed for %s, issued for %s", addr, c.NotAfter.Sub(c.NotBefore), old.NotAfter.Sub(old.NotBefore))
		}
	}
	// check-expiration shows what the masters serve now, not only --dir's
	// copies.
	out, err := runKiln(t, kiln, 2*time.Minute, "certs", "check-expiration", "--dir", dir)
	if err != nil {
		t.Errorf("certs check-expiration: %v\n%s", err, out)
	}
	for i, name := range names {
		row := "node/" + name + " kube-apiserver serving (:6443)"
		want := after[net.JoinHostPort(masters[i], "6443")].NotAfter.UTC().Format("Jan 02, 2006 15:04 UTC")
		if !slices.ContainsFunc(strings.Split(out, "\n"), func(l string) bool { return strings.HasPrefix(l, row) && strings.Contains(l, want) }) {
			t.Errorf("check-expiration has no row %q until %s:\n%s", row, want, out)
		}
	}
}

// assertManualRenewal checks that a master of a cluster with pki.renewal
// Manual has no renewal timer and neither the etcd nor the front-proxy CA
// key.
func assertManualRenewal(t *testing.T, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	mgr := machine.NewManager(machine.Options{})
	if out, err := mgr.Exec(ctx, name, "systemctl", "is-enabled", "kiln-certs-renew.timer"); err == nil {
		t.Errorf("%s with pki.renewal Manual: kiln-certs-renew.timer is %s", name, strings.TrimSpace(string(out)))
	}
	for _, key := range []string{"/etc/kubernetes/pki/etcd/ca.key", "/etc/kubernetes/pki/front-proxy-ca.key"} {
		if _, err := mgr.Exec(ctx, name, "test", "!", "-e", key); err != nil {
			t.Errorf("%s with pki.renewal Manual holds %s (%v)", name, key, err)
		}
	}
}

// localMasters returns the addresses of the masters of a local cluster.
func localMasters(t *testing.T, infraID, machineCIDR string, masters int) []string {
	t.Helper()
	return localMachines(t, infraID, machineCIDR, "master", masters)
}

// localMachines returns the addresses of the first n machines of pool
// ("master", "worker") of a local cluster.
func localMachines(t *testing.T, infraID, machineCIDR, pool string, n int) []string {
	t.Helper()
	cidr, err := netip.ParsePrefix(machineCIDR)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for i := range n {
		_, ip, err := localconfig.MachineAddress(cidr.Masked(), infraID, fmt.Sprintf("%s-%s-%d", infraID, pool, i))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ip.String())
	}
	return out
}

// servedCerts returns the certificate each master, by its address, serves
// where kiln renews one (the API server, etcd's client and peer ports, the
// machine-config server), by address and port.
func servedCerts(t *testing.T, masters []string) map[string]*x509.Certificate {
	t.Helper()
	out := map[string]*x509.Certificate{}
	for _, ip := range masters {
		for _, port := range []string{"6443", "2379", "2380", "22623"} {
			addr := net.JoinHostPort(ip, port)
			c, err := servedCert(addr)
			if err != nil {
				t.Errorf("%s: %v", addr, err)
				continue
			}
			out[addr] = c
		}
	}
	return out
}

// servedCert returns the certificate served at addr, read in the
// handshake (etcd asks for a client certificate, which it does not get).
func servedCert(addr string) (*x509.Certificate, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	raw, err := clusterDial(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	defer raw.Close()
	var got *x509.Certificate
	conn := tls.Client(raw, &tls.Config{
		InsecureSkipVerify: true, // read, not trusted
		VerifyPeerCertificate: func(certs [][]byte, _ [][]*x509.Certificate) error {
			if len(certs) == 0 {
				return errors.New("no certificate")
			}
			c, err := x509.ParseCertificate(certs[0])
			got = c
			return err
		},
	})
	_ = conn.HandshakeContext(ctx)
	if got == nil {
		return nil, errors.New("no certificate in the handshake")
	}
	return got, nil
}

// canary writes a ConfigMap every 200 ms and records the failed writes.
type canary struct {
	mu     sync.Mutex
	writes int
	errs   []string
	// acked is the value of the last write the API acknowledged, read
	// after finish.
	acked int
	stop  chan struct{}
	done  chan struct{}
}

func startCanary(t *testing.T, client kubernetes.Interface, ns string) *canary {
	t.Helper()
	ctx := context.Background()
	// A client of the namespace alone (tokenClient) may not create it;
	// whoever made that client did.
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) && !apierrors.IsForbidden(err) {
		t.Fatal(err)
	}
	c := &canary{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(c.done)
		for i := 0; ; i++ {
			select {
			case <-c.stop:
				return
			case <-time.After(200 * time.Millisecond):
			}
			wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "canary", Namespace: ns}, Data: map[string]string{"i": fmt.Sprint(i)}}
			_, err := client.CoreV1().ConfigMaps(ns).Update(wctx, cm, metav1.UpdateOptions{})
			if apierrors.IsNotFound(err) {
				_, err = client.CoreV1().ConfigMaps(ns).Create(wctx, cm, metav1.CreateOptions{})
			}
			cancel()
			c.mu.Lock()
			c.writes++
			if err != nil {
				c.errs = append(c.errs, time.Now().Format("15:04:05.000")+" "+err.Error())
			} else {
				c.acked = i
			}
			c.mu.Unlock()
		}
	}()
	return c
}

func (c *canary) finish() (writes int, errs []string) {
	close(c.stop)
	<-c.done
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.writes, c.errs
}

// assertRenew is `kiln certs renew` on a healthy cluster whose masters
// are at the addresses masters: they are renewed one at a time while a
// canary writes through the API's address; afterwards every master serves
// new certificates on every port, the canary lost at most the writes of
// one restart when there are several masters, --dir's kubeconfig works,
// and check-expiration shows the new dates.
func assertRenew(t *testing.T, kiln, dir string, masters []string) {
	t.Helper()
	before := servedCerts(t, masters)
	cn := startCanary(t, adminClient(t, dir), "e2e-renew")
	start := time.Now()
	out, err := runKiln(t, kiln, 20*time.Minute, "certs", "renew", "--dir", dir)
	writes, errs := cn.finish()
	if err != nil {
		t.Fatalf("certs renew: %v\n%s", err, lastLines(out, 40))
	}
	t.Logf("certs renew (%d masters, one at a time): %s; canary: %d writes, %d failed", len(masters), time.Since(start).Round(time.Second), writes, len(errs))
	assertOutput(t, "certs renew", out, "Renewal complete", "every node Ready")
	if strings.Contains(out, "at once") {
		t.Errorf("certs renew renewed every master at once although the API answered:\n%s", lastLines(out, 20))
	}
	// One restart of one API server at a time: the load balancer takes
	// it out once its /readyz fails; writes sent to it before may fail.
	// (A single master's API is down while it restarts.)
	if len(masters) > 1 && len(errs) > 5 {
		t.Errorf("the canary saw %d failed writes of %d during the renewal, more than one restart explains: %v", len(errs), writes, errs)
	}
	after := servedCerts(t, masters)
	for addr, old := range before {
		c := after[addr]
		if c == nil {
			continue
		}
		if c.SerialNumber.Cmp(old.SerialNumber) == 0 || !c.NotAfter.After(old.NotAfter) {
			t.Errorf("%s serves the certificate it served before the renewal (until %s)", addr, old.NotAfter)
		}
	}
	assertRenewedDir(t, kiln, dir, after)
}

// assertRenewedDir checks that --dir's new kubeconfig works and that
// check-expiration shows the date the API server serves.
func assertRenewedDir(t *testing.T, kiln, dir string, served map[string]*x509.Certificate) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if body, err := adminClient(t, dir).Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx); err != nil || string(body) != "ok" {
		t.Errorf("/readyz with the renewed auth/kubeconfig = %q, %v", body, err)
	}
	if _, err := os.Stat(filepath.Join(dir, installdir.RenewJournal)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s after the renewal: %v, want it gone", installdir.RenewJournal, err)
	}
	out, err := runKiln(t, kiln, 2*time.Minute, "certs", "check-expiration", "--dir", dir, "--nodes=false")
	if err != nil {
		t.Fatalf("certs check-expiration: %v\n%s", err, out)
	}
	for addr, c := range served {
		if !strings.HasSuffix(addr, ":6443") {
			continue
		}
		want := c.NotAfter.UTC().Format("Jan 02, 2006 15:04 UTC")
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, "tls/apiserver ") && !strings.Contains(l, want) {
				t.Errorf("check-expiration shows %q; the API server serves a certificate until %s", l, want)
			}
		}
		break
	}
}

// assertRenewExpired waits for the certificates of a cluster created with
// shortLeafValidity to expire: the API stops answering; `kiln certs renew`
// renews every master at once and brings it back.
func assertRenewExpired(t *testing.T, kiln, dir string, masters []string) {
	t.Helper()
	before := servedCerts(t, masters)
	var expiry time.Time
	for _, c := range before {
		if c.NotAfter.After(expiry) {
			expiry = c.NotAfter
		}
	}
	if wait := time.Until(expiry); wait > shortLeafValidity {
		t.Fatalf("the masters serve certificates until %s, later than pki.leafValidity %s allows", expiry, shortLeafValidity)
	} else if wait > 0 {
		t.Logf("waiting %s for the certificates to expire (%s)", wait.Round(time.Second), expiry.UTC().Format(time.TimeOnly))
		time.Sleep(wait + 30*time.Second)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := adminClient(t, dir).Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
	if err == nil || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("/readyz after the certificates' expiry: %v; want a certificate expired", err)
	}
	start := time.Now()
	out, err := runKiln(t, kiln, 20*time.Minute, "certs", "renew", "--dir", dir)
	if err != nil {
		t.Fatalf("certs renew after the expiry: %v\n%s", err, lastLines(out, 40))
	}
	t.Logf("certs renew of expired certificates: %s", time.Since(start).Round(time.Second))
	assertOutput(t, "certs renew", out, "The API does not answer: renewing on", "Renewal complete", "every node Ready")
	after := servedCerts(t, masters)
	for addr, c := range after {
		if !c.NotAfter.After(time.Now().Add(shortLeafValidity / 2)) {
			t.Errorf("%s serves a certificate until %s after the renewal", addr, c.NotAfter)
		}
	}
	assertRenewedDir(t, kiln, dir, after)
}
