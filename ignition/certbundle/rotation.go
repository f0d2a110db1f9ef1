package certbundle

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/kiln-project/kiln/ignition/nodelayout"
)

// Phases of a CA rotation, in order (see cmd/cluster/rotateca).
const (
	// PhaseIntroduce makes every node trust the old and the new CAs.
	PhaseIntroduce = "introduce"
	// PhaseReissue gives the masters leaves and signing CAs from the new.
	PhaseReissue = "reissue"
	// PhaseKubelets gives every kubelet client and serving certificates
	// from the new CAs.
	PhaseKubelets = "kubelets"
	// PhaseRetire makes every node trust the new CAs only.
	PhaseRetire = "retire"
)

// Phases returns the phases of a CA rotation in order.
func Phases() []string {
	return []string{PhaseIntroduce, PhaseReissue, PhaseKubelets, PhaseRetire}
}

// Rotation is what `kiln certs rotate-ca` sends a node for one phase. It is
// JSON, 0600: it holds keys.
type Rotation struct {
	// Run names the rotation.
	Run string `json:"run"`
	// Phase is one of Phases.
	Phase string `json:"phase"`
	// Files are written as they are (RotationWritable): trust bundles,
	// the CAs' keys and signing copies, leaves, kubeconfigs, the config
	// the machine-config server serves workers.
	Files []File `json:"files,omitempty"`
	// KubeconfigCA, when set, becomes the CA data of every kubeconfig on
	// the node (the control plane's, the kubelet's and its bootstrap
	// kubeconfig) once Files are written.
	KubeconfigCA []byte `json:"kubeconfigCA,omitempty"`
	// KubeletClient, when set, is the kubelet's new client certificate
	// and key (PEM), for the same user as the one it has.
	KubeletClient []byte `json:"kubeletClient,omitempty"`
	// KubeletServingCA, when set, makes the kubelet request a new serving
	// certificate unless the one it has is signed by this CA, and the
	// node wait until it has one that is.
	KubeletServingCA []byte `json:"kubeletServingCA,omitempty"`
	// Rotating keeps nodelayout.CARotationMarker while the rotation runs;
	// false (the last phase) removes it.
	Rotating bool `json:"rotating"`
}

// Check reports what is wrong with r, all at once.
func (r Rotation) Check() error {
	var errs []error
	if !runName.MatchString(r.Run) {
		errs = append(errs, fmt.Errorf("run %q is not a rotation's name", r.Run))
	}
	if !slices.Contains(Phases(), r.Phase) {
		errs = append(errs, fmt.Errorf("phase %q is not one of %s", r.Phase, strings.Join(Phases(), ", ")))
	}
	for _, f := range r.Files {
		if !RotationWritable(f.Path) {
			errs = append(errs, fmt.Errorf("%s is not a file a CA rotation writes", f.Path))
		}
	}
	return errors.Join(errs...)
}

// RotationWritable reports whether p is a file a CA rotation may replace
// on a node: what a renewal may (Renewable), the CAs' certificates and
// keys in the control plane's PKI directories but the service account
// key pair (not rotated), and the worker config the machine-config server
// serves.
func RotationWritable(p string) bool {
	if Renewable(p) {
		return true
	}
	if p != path.Clean(p) || !path.IsAbs(p) {
		return false
	}
	dir, base := path.Split(p)
	switch strings.TrimSuffix(dir, "/") {
	case nodelayout.PKIDir, nodelayout.EtcdPKIDir:
		ext := path.Ext(base)
		return (ext == ".crt" || ext == ".key") && !strings.HasPrefix(base, "sa.")
	case nodelayout.MCSConfigDir:
		return base == "worker.ign"
	}
	return false
}
