package bootkube

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kiln-project/kiln/cmd/internal/handover"
	"github.com/kiln-project/kiln/ignition/nodelayout"
)

// Paths inside the installer pod.
const (
	installerSecretDir = "/secret"
	installerHostDir   = "/host" + nodelayout.KubernetesDir
)

// install stores a master's etcd files in a Secret and starts the installer
// pod on that master (InstallMember).
func (g *grower) install(ctx context.Context, m master, files map[string][]byte) error {
	return InstallMember(ctx, g.client, m.Name, g.cfg.InstallerImage, files)
}

// InstallMember stores a master's etcd files (certificates and the etcd
// static pod, etcd.yaml) in a Secret and starts the installer pod on node:
// it writes them under /etc/kubernetes, waits for the member to become a
// voter and then activates the master's staged control plane static pods.
// Bootstrap grows etcd with it, and kiln scale cluster adds a master with
// it. Running it again replaces the Secret and the pod.
func InstallMember(ctx context.Context, client kubernetes.Interface, node, image string, files map[string][]byte) error {
	m := master{Name: node}
	secrets := client.CoreV1().Secrets(handover.SystemNamespace)
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: installerName("etcd", m), Namespace: handover.SystemNamespace},
		Data:       files,
	}
	if _, err := secrets.Create(ctx, secret, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
		if _, err := secrets.Update(ctx, secret, metav1.UpdateOptions{}); err != nil {
			return err
		}
	} else if err != nil {
		return err
	}
	pods := client.CoreV1().Pods(handover.SystemNamespace)
	if err := pods.Delete(ctx, installerName(handover.InstallerLabelValue, m), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	if _, err := pods.Create(ctx, InstallerPod(m.Name, image), metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("installer pod for %s: %w", m.Name, err)
	}
	return nil
}

// cleanupInstaller removes the installer's Secret (it holds keys).
func (g *grower) cleanupInstaller(ctx context.Context, m master) {
	if err := DeleteInstallerSecret(ctx, g.client, m.Name); err != nil {
		g.cfg.Log.Warnf("delete installer secret of %s: %v", m.Name, err)
	}
}

// DeleteInstallerSecret deletes the Secret InstallMember made for node: it
// holds the member's keys. One already gone is fine.
func DeleteInstallerSecret(ctx context.Context, client kubernetes.Interface, node string) error {
	err := client.CoreV1().Secrets(handover.SystemNamespace).Delete(ctx, installerName("etcd", master{Name: node}), metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

func installerName(prefix string, m master) string { return prefix + "-" + m.Name }

// InstallerPod is the pod that installs a master's etcd member. It runs the
// kiln binary bound into every machine, in an image every node has.
func InstallerPod(node, image string) *corev1.Pod {
	privileged := true
	file, dir := corev1.HostPathFile, corev1.HostPathDirectoryOrCreate
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:      "etcd-installer-" + node,
			Namespace: handover.SystemNamespace,
			Labels:    map[string]string{handover.InstallerLabelKey: handover.InstallerLabelValue},
		},
		Spec: corev1.PodSpec{
			NodeName:          node,
			HostNetwork:       true,
			RestartPolicy:     corev1.RestartPolicyOnFailure,
			PriorityClassName: "system-node-critical",
			Tolerations:       []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			Containers: []corev1.Container{{
				Name:            "installer",
				Image:           image,
				ImagePullPolicy: corev1.PullNever,
				Command: []string{nodelayout.KilnBinary, "node", "etcd-install",
					"--from=" + installerSecretDir, "--kubernetes-dir=" + installerHostDir},
				SecurityContext: &corev1.SecurityContext{Privileged: &privileged},
				VolumeMounts: []corev1.VolumeMount{
					{Name: "files", MountPath: installerSecretDir, ReadOnly: true},
					{Name: "kubernetes", MountPath: installerHostDir},
					{Name: "kiln", MountPath: nodelayout.KilnBinary, ReadOnly: true},
				},
			}},
			Volumes: []corev1.Volume{
				{Name: "files", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "etcd-" + node}}},
				{Name: "kubernetes", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: nodelayout.KubernetesDir, Type: &dir}}},
				{Name: "kiln", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: nodelayout.KilnBinary, Type: &file}}},
			},
		},
	}
}
