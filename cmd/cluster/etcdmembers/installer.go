package etcdmembers

import (
	"context"
	"fmt"
	"net"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kiln-project/kiln/assets/manifests"
	kilntls "github.com/kiln-project/kiln/assets/tls"
	"github.com/kiln-project/kiln/cmd/cluster/handover"
	"github.com/kiln-project/kiln/ignition/nodelayout"
)

var _ Installer = PodInstaller{}

// Paths inside the installer pod.
const (
	installerSecretDir = "/secret"
	installerHostDir   = "/host" + nodelayout.KubernetesDir
)

// PodInstaller installs the member of the master Node at IP through the
// etcd installer pod: it issues the member's certificates from the etcd
// CA, renders the masters' etcd static pod with the member's
// --initial-cluster, stores both in Secret kiln-system/etcd-<node> and
// starts pod kiln-system/etcd-installer-<node> on the master, which runs
// `kiln node etcd-install`: it writes the files under /etc/kubernetes,
// waits for the member to vote and then activates the master's staged
// control plane static pods. Bootstrap grows etcd with it, and kiln scale
// cluster adds masters with it.
type PodInstaller struct {
	Kube kubernetes.Interface
	// CA is the etcd CA, key included.
	CA *kilntls.CertKey
	// Manifest is the masters' etcd static pod with
	// manifests.EtcdInitialClusterMarker.
	Manifest string
	// Image is an image every node has; the pod runs the kiln binary bound
	// into the machine.
	Image string
	// Node and IP are the master's Node name and InternalIP.
	Node, IP string
	// Validity is the lifetime of the member's certificates
	// (pki.leafValidity).
	Validity time.Duration
}

// Install issues the member's certificates, renders its static pod for
// the learner id of members and starts the installer with them. Running
// it again replaces the Secret and the pod.
func (p PodInstaller) Install(ctx context.Context, members []*etcdserverpb.Member, id uint64) error {
	member, err := Issue(ctx, p.CA, p.Node, net.ParseIP(p.IP), p.Validity)
	if err != nil {
		return err
	}
	files := Files(p.CA.Cert, member)
	files[ManifestFile] = []byte(strings.ReplaceAll(p.Manifest, manifests.EtcdInitialClusterMarker, initialCluster(members, id, p.Node)))
	secrets := p.Kube.CoreV1().Secrets(handover.SystemNamespace)
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: installerSecret(p.Node), Namespace: handover.SystemNamespace},
		Data:       files,
	}
	if _, err := secrets.Create(ctx, secret, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
		if _, err := secrets.Update(ctx, secret, metav1.UpdateOptions{}); err != nil {
			return err
		}
	} else if err != nil {
		return err
	}
	pods := p.Kube.CoreV1().Pods(handover.SystemNamespace)
	if err := pods.Delete(ctx, installerPod(p.Node), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	if _, err := pods.Create(ctx, InstallerPod(p.Node, p.Image), metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("installer pod for %s: %w", p.Node, err)
	}
	return nil
}

// Lost reports whether the installer pod of the node is missing or failed.
func (p PodInstaller) Lost(ctx context.Context) bool {
	pod, err := p.Kube.CoreV1().Pods(handover.SystemNamespace).Get(ctx, installerPod(p.Node), metav1.GetOptions{})
	return apierrors.IsNotFound(err) || (err == nil && pod.Status.Phase == corev1.PodFailed)
}

// DeleteInstallerSecret deletes the Secret PodInstaller made for node: it
// holds the member's keys. One already gone is fine.
func DeleteInstallerSecret(ctx context.Context, client kubernetes.Interface, node string) error {
	err := client.CoreV1().Secrets(handover.SystemNamespace).Delete(ctx, installerSecret(node), metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// installerSecret and installerPod name the installer's Secret and pod
// for node.
func installerSecret(node string) string { return "etcd-" + node }

func installerPod(node string) string { return "etcd-installer-" + node }

// InstallerPod is the pod that installs a master's etcd member. It runs the
// kiln binary bound into every machine, in an image every node has.
func InstallerPod(node, image string) *corev1.Pod {
	privileged := true
	file, dir := corev1.HostPathFile, corev1.HostPathDirectoryOrCreate
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:      installerPod(node),
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
				{Name: "files", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: installerSecret(node)}}},
				{Name: "kubernetes", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: nodelayout.KubernetesDir, Type: &dir}}},
				{Name: "kiln", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: nodelayout.KilnBinary, Type: &file}}},
			},
		},
	}
}
