package platforms

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/kiln-project/kiln/assets/release"
	"github.com/kiln-project/kiln/ignition/nodelayout"
)

// ProbeContainer runs `kiln node probe` with args in the pause image (the
// only image on every node, local machine or ssh host) with the node's
// kiln binary mounted in: no other image is reachable offline. A
// platform's provisioner implements waitfor.Prober with it.
func ProbeContainer(name string, args ...string) (corev1.Container, []corev1.Volume) {
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
