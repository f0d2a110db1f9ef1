// Package certrenew is a master's automatic renewal of its leaf
// certificates (install-config pki.renewal Automatic). The master's
// kiln-certs-renew timer runs it: it finds the control plane's
// certificates and kubeconfigs on this master that expire within
// pki.renewBefore, issues each again from the CA on this master that
// signed it (tls.Extend: the same key, names, usages and lifetime), and
// puts them in place through certinstall, which restarts only what reads
// them, under the cluster's renewal lock in etcd: one master at a time.
// It renews nothing while a CA rotation is under way on this master
// (nodelayout.CARotationMarker). It trusts nothing but the files of this master: the certificates it
// renews are the ones kiln put there, signed by the CAs there.
package certrenew

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
	"k8s.io/client-go/tools/clientcmd"

	kilntls "github.com/kiln-project/kiln/assets/tls"
	"github.com/kiln-project/kiln/ignition/certbundle"
	"github.com/kiln-project/kiln/ignition/nodelayout"
)

// CAs are the certificate authorities whose keys a master signs renewed
// certificates with, by the path of their certificate; the key is next
// to it (.key). The kubelet serving CA signs nothing kiln renews.
func CAs() []string {
	return []string{
		nodelayout.PKIDir + "/ca.crt",
		nodelayout.PKIDir + "/front-proxy-ca.crt",
		nodelayout.EtcdPKIDir + "/ca.crt",
	}
}

// Renewer renews what is due on this master.
type Renewer struct {
	// Root is prefixed to every path (tests); empty on a master.
	Root string
	// Before renews a certificate that expires within it.
	Before time.Duration
	// Install puts a bundle in place (certinstall.Install.Do).
	Install func(ctx context.Context, b certbundle.Bundle) error
	Now     func() time.Time
	Log     logrus.FieldLogger
}

// Plan is what one look at this master found.
type Plan struct {
	// Bundle holds the renewed files; none when nothing is due.
	Bundle certbundle.Bundle
	// Renewed are the paths of the due certificates, by what holds them.
	Renewed []string
	// Next is the earliest expiry of the certificates that are not due,
	// NextPath where it is.
	Next     time.Time
	NextPath string
}

// Run renews what is due and installs it; with nothing due it says when
// the next certificate is. A certificate it cannot renew (its CA's key is
// not here) fails the run after the others are renewed.
func (r *Renewer) Run(ctx context.Context) error {
	if run, err := os.ReadFile(filepath.Join(r.Root, nodelayout.CARotationMarker)); err == nil {
		// The trust files hold two CAs and ca.key may be the new one's.
		r.Log.Infof("CA rotation %s is under way: renewing nothing until it is done", strings.TrimSpace(string(run)))
		return nil
	}
	p, err := r.Plan()
	if len(p.Renewed) == 0 {
		if err == nil && p.NextPath != "" {
			r.Log.Infof("nothing to renew: the first certificate to expire is %s on %s; renewed from %s",
				p.NextPath, p.Next.UTC().Format(time.RFC3339), p.Next.Add(-r.Before).UTC().Format(time.RFC3339))
		}
		return err
	}
	// What could be renewed is, even when another certificate could not.
	r.Log.Infof("renewing %s (renewal %s)", strings.Join(p.Renewed, ", "), p.Bundle.Run)
	return errors.Join(err, r.Install(ctx, p.Bundle))
}

// Plan reads this master's certificates and issues again those that
// expire within Before, without writing anything.
func (r *Renewer) Plan() (Plan, error) {
	now := r.Now()
	cas, err := r.cas()
	if err != nil {
		return Plan{}, err
	}
	p := Plan{Bundle: certbundle.Bundle{Run: "auto-" + now.UTC().Format("20060102T150405Z")}}
	var errs []error
	due := func(file string, cert *x509.Certificate) bool {
		if cert.NotAfter.Sub(now) < r.Before {
			return true
		}
		if p.NextPath == "" || cert.NotAfter.Before(p.Next) {
			p.Next, p.NextPath = cert.NotAfter, file
		}
		return false
	}
	certs, kubeconfigs, err := r.files()
	if err != nil {
		return Plan{}, err
	}
	for _, f := range certs {
		data, mode, err := r.read(f)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		cert, err := leaf(data)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", f, err))
			continue
		}
		if !due(f, cert) {
			continue
		}
		renewed, err := extend(cas, cert, data, now)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", f, err))
			continue
		}
		p.Bundle.Files = append(p.Bundle.Files, certbundle.File{Path: f, Mode: mode, Data: renewed})
		p.Renewed = append(p.Renewed, f)
	}
	for _, f := range kubeconfigs {
		data, mode, err := r.read(f)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		renewed, ok, err := r.kubeconfig(cas, f, data, now, due)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", f, err))
			continue
		}
		if ok {
			p.Bundle.Files = append(p.Bundle.Files, certbundle.File{Path: f, Mode: mode, Data: renewed})
			p.Renewed = append(p.Renewed, f)
		}
	}
	return p, errors.Join(errs...)
}

// kubeconfig renews the client certificate that the kubeconfig data at
// file embeds when it is due.
func (r *Renewer) kubeconfig(cas []ca, file string, data []byte, now time.Time, due func(string, *x509.Certificate) bool) ([]byte, bool, error) {
	cfg, err := clientcmd.Load(data)
	if err != nil {
		return nil, false, err
	}
	changed := false
	for _, name := range slices.Sorted(maps.Keys(cfg.AuthInfos)) {
		ai := cfg.AuthInfos[name]
		if len(ai.ClientCertificateData) == 0 {
			continue
		}
		cert, err := leaf(ai.ClientCertificateData)
		if err != nil {
			return nil, false, fmt.Errorf("user %s: %w", name, err)
		}
		if !due(file, cert) {
			continue
		}
		if ai.ClientCertificateData, err = extend(cas, cert, ai.ClientCertificateData, now); err != nil {
			return nil, false, fmt.Errorf("user %s: %w", name, err)
		}
		changed = true
	}
	if !changed {
		return nil, false, nil
	}
	out, err := clientcmd.Write(*cfg)
	return out, true, err
}

// files lists the renewable certificates and kubeconfigs on this master
// (certbundle.Renewable), by their path on the master.
func (r *Renewer) files() (certs, kubeconfigs []string, err error) {
	for _, dir := range []string{nodelayout.PKIDir, nodelayout.EtcdPKIDir, nodelayout.MCSConfigDir, nodelayout.KubeconfigDir} {
		entries, err := os.ReadDir(filepath.Join(r.Root, filepath.FromSlash(dir)))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		for _, e := range entries {
			p := path.Join(dir, e.Name())
			if !e.Type().IsRegular() || !certbundle.Renewable(p) {
				continue
			}
			switch path.Ext(p) {
			case ".crt":
				certs = append(certs, p)
			case ".kubeconfig":
				kubeconfigs = append(kubeconfigs, p)
			}
		}
	}
	return certs, kubeconfigs, nil
}

// read returns the regular file p of this master and its mode; a link is
// refused (root never follows one it did not make).
func (r *Renewer) read(p string) ([]byte, fs.FileMode, error) {
	full := filepath.Join(r.Root, filepath.FromSlash(p))
	info, err := os.Lstat(full)
	if err != nil {
		return nil, 0, err
	}
	if !info.Mode().IsRegular() {
		return nil, 0, fmt.Errorf("%s is not a regular file", p)
	}
	data, err := os.ReadFile(full)
	return data, info.Mode().Perm(), err
}

// ca is one CA of this master: its certificate, and its key when the
// master holds it.
type ca struct {
	path string
	cert *x509.Certificate
	ck   kilntls.CertKey
}

// cas reads the CAs of CAs() that this master holds.
func (r *Renewer) cas() ([]ca, error) {
	var out []ca
	for _, p := range CAs() {
		certPEM, _, err := r.read(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		cert, err := leaf(certPEM)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		c := ca{path: p, cert: cert}
		keyPath := strings.TrimSuffix(p, ".crt") + ".key"
		key, _, err := r.read(keyPath)
		switch {
		case err == nil:
			c.ck = kilntls.CertKey{Cert: certPEM, Key: key}
		case !errors.Is(err, fs.ErrNotExist):
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// extend issues cert (data, PEM) again from the CA of cas that signed it.
func extend(cas []ca, cert *x509.Certificate, data []byte, now time.Time) ([]byte, error) {
	for _, c := range cas {
		if cert.CheckSignatureFrom(c.cert) != nil {
			continue
		}
		if len(c.ck.Key) == 0 {
			return nil, fmt.Errorf("its CA's key (%s) is not on this master (install-config pki.renewal Manual?): renew with `kiln certs renew`",
				strings.TrimSuffix(c.path, ".crt")+".key")
		}
		return kilntls.Extend(&c.ck, data, now)
	}
	return nil, fmt.Errorf("%q was signed by no CA on this master (%s)", cert.Subject.CommonName, strings.Join(CAs(), ", "))
}

// leaf parses the first certificate of data.
func leaf(data []byte) (*x509.Certificate, error) {
	b, _ := pem.Decode(data)
	if b == nil || b.Type != "CERTIFICATE" {
		return nil, errors.New("no PEM certificate")
	}
	return x509.ParseCertificate(b.Bytes)
}
