// Package carotate is a node's part of one phase of `kiln certs rotate-ca`
// (certbundle.Rotation): it writes the trust bundles, keys and leaves the
// host sent, points every kubeconfig on the node at the CAs of the phase,
// swaps in the kubelet's new client certificate (re-pointing the link the
// kubelet reads, never writing through it), makes the kubelet request a
// serving certificate from the new CA, restarts what read the old files
// (etcd and the control plane through their static pods, the kubelet and
// kiln-netd through systemd) and waits until they run again: etcd and the
// API server ready, the kubelet healthy, its serving certificate signed by
// the CA asked for. It needs no API. A second run of the same phase
// changes nothing it changed already and waits the same way.
package carotate

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kiln-project/kiln/cmd/node/certinstall"
	"github.com/kiln-project/kiln/graph/atomicfile"
	"github.com/kiln-project/kiln/ignition/certbundle"
	"github.com/kiln-project/kiln/ignition/nodelayout"
)

// Units are the systemd units a phase restarts on every node: the kubelet
// (its kubeconfig, client CA and certificates), kiln-netd (the kubelet's
// kubeconfig, or on a master the admin one) and the machine-config agent
// (the kubelet's kubeconfig): a client reloads its certificate files but
// not the CAs it trusts.
func Units() []string {
	return []string{"kubelet.service", "kiln-netd.service", "kiln-machine-config-agent.service"}
}

// StaticPods returns the static pods a phase that writes files restarts on
// a master: etcd first, then the control plane.
func StaticPods() []certinstall.Component {
	return append([]certinstall.Component{{Manifest: "etcd.yaml", Binary: "etcd"}}, certinstall.Components()...)
}

// Rotate applies a certbundle.Rotation on this node.
type Rotate struct {
	// Root is prefixed to every path (tests); empty on a node.
	Root string
	// Started returns when the newest process running binary started.
	Started func(binary string) (t time.Time, ok bool, err error)
	// Ready reports whether the local API server answers /readyz with
	// servingCert.
	Ready func(ctx context.Context, servingCert []byte) error
	// Restart restarts a systemd unit.
	Restart func(ctx context.Context, unit string) error
	// KubeletHealthy reports whether the kubelet answers /healthz.
	KubeletHealthy func(ctx context.Context) error
	// Lock, when set, is the cluster's renewal lock (certinstall.EtcdLock),
	// held while a master's static pods restart.
	Lock func(ctx context.Context) (unlock func(), err error)
	// Settle is how long the lock is kept once the API server is ready.
	Settle time.Duration
	Now    func() time.Time
	Poll   time.Duration
	Log    logrus.FieldLogger
}

func (r *Rotate) path(p string) string { return filepath.Join(r.Root, filepath.FromSlash(p)) }

// Do applies b (see the package comment).
func (r *Rotate) Do(ctx context.Context, b certbundle.Rotation) error {
	if err := b.Check(); err != nil {
		return err
	}
	unlockNode, err := certinstall.LockNode(r.Root)
	if err != nil {
		return err
	}
	defer unlockNode()
	if b.Rotating {
		// First, so the automatic renewal holds off from here on.
		if err := atomicfile.Write(r.path(nodelayout.CARotationMarker), []byte(b.Run+"\n"), 0o644); err != nil {
			return err
		}
	}
	pods := r.master()
	if pods && r.Lock != nil && len(b.Files) > 0 {
		unlock, err := r.Lock(ctx)
		if err != nil {
			return err
		}
		defer unlock()
	}
	since := r.Now()
	for _, f := range b.Files {
		p := r.path(f.Path)
		if old, err := os.ReadFile(p); err == nil && bytes.Equal(old, f.Data) {
			continue
		}
		if err := atomicfile.Write(p, f.Data, f.Mode); err != nil {
			return err
		}
		r.Log.Infof("wrote %s", f.Path)
	}
	if pods {
		if err := MigrateSigning(r.Root); err != nil {
			return err
		}
	}
	if len(b.KubeconfigCA) > 0 {
		if err := r.setKubeconfigCA(b.KubeconfigCA); err != nil {
			return err
		}
	}
	if len(b.KubeletClient) > 0 {
		if err := r.swapKubeletClient(b.Run, b.KubeletClient); err != nil {
			return err
		}
	}
	if len(b.KubeletServingCA) > 0 {
		if err := r.dropKubeletServing(b.KubeletServingCA); err != nil {
			return err
		}
	}
	// The static pods first, through the running kubelet, and only once
	// they run again the kubelet: a kubelet restarted while it replaces a
	// static pod, or just before, took 2 minutes to start the new one
	// (measured both ways), as its volume manager waited on the old pod.
	var restarted []certinstall.Component
	if pods && len(b.Files) > 0 {
		dir := r.path(nodelayout.StaticPodDir)
		for _, c := range StaticPods() {
			changed, err := certinstall.Annotate(filepath.Join(dir, c.Manifest), b.Run+"-"+b.Phase)
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				return fmt.Errorf("%s: %w", c.Manifest, err)
			}
			if changed {
				r.Log.Infof("restarting %s for CA rotation %s (%s)", c.Binary, b.Run, b.Phase)
				restarted = append(restarted, c)
			}
		}
		if err := atomicfile.SyncDir(dir); err != nil {
			return err
		}
		if err := r.wait(ctx, true, restarted, since, nil); err != nil {
			return err
		}
	}
	for _, u := range Units() {
		if err := r.Restart(ctx, u); err != nil {
			return fmt.Errorf("restart %s: %w", u, err)
		}
	}
	if err := r.wait(ctx, pods, nil, since, b.KubeletServingCA); err != nil {
		return err
	}
	if pods && r.Lock != nil && len(restarted) > 0 && r.Settle > 0 {
		select {
		case <-time.After(r.Settle):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if !b.Rotating {
		if err := os.Remove(r.path(nodelayout.CARotationMarker)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

// master reports whether this node runs the control plane: it has the
// API server's static pod.
func (r *Rotate) master() bool {
	_, err := os.Stat(r.path(path.Join(nodelayout.StaticPodDir, "kube-apiserver.yaml")))
	return err == nil
}

// wait waits until the restarted static pods run processes started after
// since and, on a master, the API server here is ready with the serving
// certificate on disk, the kubelet is healthy, and, with servingCA, the
// kubelet serves a certificate servingCA signed.
func (r *Rotate) wait(ctx context.Context, master bool, restarted []certinstall.Component, since time.Time, servingCA []byte) error {
	last := ""
	err := wait.PollUntilContextCancel(ctx, r.Poll, true, func(ctx context.Context) (bool, error) {
		for _, c := range restarted {
			t, ok, err := r.Started(c.Binary)
			if err != nil {
				return false, err
			}
			if !ok || t.Before(since) {
				last = c.Binary + " has not restarted yet"
				return false, nil
			}
		}
		if master {
			serving, err := os.ReadFile(r.path(nodelayout.PKIDir + "/apiserver.crt"))
			if err != nil {
				return false, err
			}
			if err := r.Ready(ctx, serving); err != nil {
				last = "the API server: " + err.Error()
				return false, nil
			}
		}
		if err := r.KubeletHealthy(ctx); err != nil {
			last = "the kubelet: " + err.Error()
			return false, nil
		}
		if len(servingCA) > 0 {
			if err := signedBy(r.path(path.Join(nodelayout.KubeletPKIDir, "kubelet-server-current.pem")), servingCA); err != nil {
				last = "the kubelet's serving certificate: " + err.Error()
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("%w: %s", err, last)
	}
	return nil
}

// kubeconfigs returns the kubeconfigs on a node whose CA a rotation sets:
// the control plane's (a master), the kubelet's and its bootstrap
// kubeconfig, those that exist.
func (r *Rotate) kubeconfigs() ([]string, error) {
	found, err := filepath.Glob(r.path(nodelayout.KubeconfigDir + "/*.kubeconfig"))
	if err != nil {
		return nil, err
	}
	for _, p := range []string{nodelayout.KubeletKubeconfig, nodelayout.BootstrapKubeconfig} {
		if _, err := os.Lstat(r.path(p)); err == nil {
			found = append(found, r.path(p))
		}
	}
	return found, nil
}

// setKubeconfigCA makes ca the certificate-authority-data of every
// cluster of every kubeconfig on the node that carries its CA inline; one
// that names a CA file reads the file, which Files wrote.
func (r *Rotate) setKubeconfigCA(ca []byte) error {
	paths, err := r.kubeconfigs()
	if err != nil {
		return err
	}
	for _, p := range paths {
		info, err := os.Lstat(p)
		if err != nil {
			return err
		}
		if !info.Mode().IsRegular() {
			return fmt.Errorf("%s is not a regular file", p)
		}
		cfg, err := clientcmd.LoadFromFile(p)
		if err != nil {
			return err
		}
		changed := false
		for _, c := range cfg.Clusters {
			if c.CertificateAuthority == "" && !bytes.Equal(c.CertificateAuthorityData, ca) {
				c.CertificateAuthorityData = ca
				changed = true
			}
		}
		if !changed {
			continue
		}
		data, err := clientcmd.Write(*cfg)
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		if err := atomicfile.Write(p, data, info.Mode().Perm()); err != nil {
			return err
		}
		r.Log.Infof("set the CA of %s", strings.TrimPrefix(p, r.Root))
	}
	return nil
}

// swapKubeletClient puts pair (certificate and key, PEM) next to the
// kubelet's client certificates and re-points kubelet-client-current.pem
// at it: a new link renamed over the old, so nothing is written through
// it. The new certificate must name the user the current one names.
func (r *Rotate) swapKubeletClient(run string, pair []byte) error {
	dir := r.path(nodelayout.KubeletPKIDir)
	current := filepath.Join(dir, "kubelet-client-current.pem")
	name := "kubelet-client-" + run + ".pem"
	if target, err := os.Readlink(current); err == nil && filepath.Base(target) == name {
		return nil // swapped by an earlier run
	}
	old, err := firstCert(current)
	if err != nil {
		return fmt.Errorf("the kubelet's client certificate: %w", err)
	}
	block, _ := pem.Decode(pair)
	if block == nil {
		return errors.New("the new kubelet client certificate is not PEM")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return fmt.Errorf("the new kubelet client certificate: %w", err)
	}
	if cert.Subject.String() != old.Subject.String() {
		return fmt.Errorf("the new kubelet client certificate is for %q, the kubelet is %q", cert.Subject, old.Subject)
	}
	if err := atomicfile.Write(filepath.Join(dir, name), pair, 0o600); err != nil {
		return err
	}
	tmp := current + ".kiln-new"
	if err := os.Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	// Relative, as the file is next to the link.
	if err := os.Symlink(name, tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, current); err != nil {
		os.Remove(tmp)
		return err
	}
	r.Log.Infof("the kubelet's client certificate is now %s", name)
	return atomicfile.SyncDir(dir)
}

// dropKubeletServing removes the link to the kubelet's serving
// certificate unless ca signed it, so the restarted kubelet requests a new
// one (the link only: the files stay, as the kubelet's own rotation leaves
// them).
func (r *Rotate) dropKubeletServing(ca []byte) error {
	current := r.path(path.Join(nodelayout.KubeletPKIDir, "kubelet-server-current.pem"))
	if signedBy(current, ca) == nil {
		return nil
	}
	if err := os.Remove(current); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	r.Log.Infof("removed the kubelet's serving certificate: it requests one from the new CA")
	return nil
}

// signedBy reports why the first certificate of the file at p does not
// verify against ca (PEM), nil when it does.
func signedBy(p string, ca []byte) error {
	cert, err := firstCert(p)
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return errors.New("no CA certificate to check against")
	}
	_, err = cert.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
	return err
}

// firstCert reads the first certificate of the PEM file at p.
func firstCert(p string) (*x509.Certificate, error) {
	data, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			return nil, fmt.Errorf("%s holds no certificate", p)
		}
		if block.Type == "CERTIFICATE" {
			return x509.ParseCertificate(block.Bytes)
		}
	}
}

// signingFlag matches a kube-controller-manager signer flag that names the
// trust files (ca.*, kubelet-serving-ca.*), as the manifests of kiln before
// nodelayout.SigningCA did.
var signingFlag = regexp.MustCompile(`(--cluster-signing-[a-z-]+-(?:cert|key)-file=)` + regexp.QuoteMeta(nodelayout.PKIDir) + `/(ca|kubelet-serving-ca)\.(crt|key)\b`)

// MigrateSigning makes the kube-controller-manager manifest under root
// read its signing CAs from nodelayout.SigningCA and
// SigningKubeletServingCA, once they exist; a manifest that does already,
// or none, is left alone.
func MigrateSigning(root string) error {
	p := filepath.Join(root, nodelayout.StaticPodDir, "kube-controller-manager.yaml")
	data, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	out := signingFlag.ReplaceAll(data, []byte("${1}"+nodelayout.PKIDir+"/signing-${2}.${3}"))
	if bytes.Equal(out, data) {
		return nil
	}
	for _, base := range []string{nodelayout.SigningCA, nodelayout.SigningKubeletServingCA} {
		for _, ext := range []string{".crt", ".key"} {
			if _, err := os.Stat(filepath.Join(root, base+ext)); err != nil {
				return fmt.Errorf("kube-controller-manager cannot sign from %s yet: %w", base+ext, err)
			}
		}
	}
	info, err := os.Stat(p)
	if err != nil {
		return err
	}
	return atomicfile.Write(p, out, info.Mode().Perm())
}
