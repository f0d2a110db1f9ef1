package provision

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/kiln-project/kiln/platforms"
)

// ProbeContainer implements waitfor.Prober (platforms.ProbeContainer).
func (p *Provisioner) ProbeContainer(name string, args ...string) (corev1.Container, []corev1.Volume) {
	return platforms.ProbeContainer(name, args...)
}
