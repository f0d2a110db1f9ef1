// Package certbundle is what `kiln certs renew` sends a master: the
// renewal's name and the leaf certificates, keys and kubeconfigs to put in
// place, and which files of the node's layout a renewal may write at all.
// The host (cmd/cluster/renew) builds a Bundle; the master's node agent
// (cmd/node/certinstall) checks and installs it.
package certbundle

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"strings"

	"github.com/kiln-project/kiln/ignition/nodelayout"
)

// Bundle is what kiln sends a master: the renewal's name and the files to
// put in place. It is JSON; the keys in it make it 0600.
type Bundle struct {
	// Run names the renewal.
	Run string `json:"run"`
	// Files are absolute paths on the master.
	Files []File `json:"files"`
}

// File is one file of a Bundle.
type File struct {
	Path string      `json:"path"`
	Mode fs.FileMode `json:"mode"`
	Data []byte      `json:"data"`
}

// runName is what a renewal's name may hold: it goes into a YAML line.
var runName = regexp.MustCompile(`^[0-9A-Za-z-]{1,40}$`)

// Check reports what is wrong with b: a bad name, or a file outside the
// leaf certificates and kubeconfigs of the control plane. A CA's key is
// never part of a renewal.
func (b Bundle) Check() error {
	var errs []error
	if !runName.MatchString(b.Run) {
		errs = append(errs, fmt.Errorf("run %q is not a renewal's name", b.Run))
	}
	for _, f := range b.Files {
		if !Renewable(f.Path) {
			errs = append(errs, fmt.Errorf("%s is not a file a renewal writes", f.Path))
		}
	}
	return errors.Join(errs...)
}

// Renewable reports whether p is a file a renewal may replace on a master:
// a certificate or key of the control plane or of etcd's member, or a
// control plane kubeconfig, but no CA's.
func Renewable(p string) bool {
	if p != path.Clean(p) || !path.IsAbs(p) {
		return false
	}
	dir, base := path.Split(p)
	dir = strings.TrimSuffix(dir, "/")
	switch dir {
	case nodelayout.PKIDir, nodelayout.EtcdPKIDir:
		ext := path.Ext(base)
		return (ext == ".crt" || ext == ".key") && !strings.HasPrefix(base, "ca.") && !strings.Contains(base, "-ca.") &&
			!strings.HasPrefix(base, "client-ca.") && !strings.HasPrefix(base, "sa.")
	case nodelayout.KubeconfigDir:
		return path.Ext(base) == ".kubeconfig"
	case nodelayout.MCSConfigDir:
		return base == "tls.crt" || base == "tls.key"
	}
	return false
}
