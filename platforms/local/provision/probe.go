package provision

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/kiln-project/kiln/assets/release"
	"github.com/kiln-project/kiln/ignition/nodelayout"
)

// ProbeContainer runs `kiln node probe` in the pause image (the only image
// guaranteed on every node) with the node's kiln binary mounted in: no other
// image is reachable offline. It implements waitfor.Prober.
func (p *Provisioner) ProbeContainer(name string, args ...string) (corev1.Container, []corev1.Volume) {
	file := corev1.HostPathFile
	return corev1.Container{
			Name:            name,
			Image:           release.PauseImage(),
			ImagePullPolicy: corev1.PullNever,
			Command:         append([]string{"/kiln/kiln", "node", "probe"}, args...),
			VolumeMounts:    []corev1.VolumeMount{{Name: "kiln", MountPath: "/kiln/kiln", ReadOnly: true}},
		}, []corev1.Volume{{Name: "kiln", VolumeSource: corev1.VolumeSource{
			HostPath: &corev1.HostPathVolumeSource{Path: nodelayout.KilnBinary, Type: &file}}}}
}
