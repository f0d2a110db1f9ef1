package etcdmembers

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"net"
	"slices"
	"testing"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kiln-project/kiln/assets/manifests"
	"github.com/kiln-project/kiln/assets/tls/tlstest"
	"github.com/kiln-project/kiln/cmd/cluster/handover"
)

// TestPodInstaller checks what the installer pod gets: the member's
// certificates for its address, its static pod with the --initial-cluster
// of the learner, on the master's Node; and that installing again
// replaces both, and Lost tells a pod that is gone or failed.
func TestPodInstaller(t *testing.T) {
	ctx := context.Background()
	kube := fake.NewClientset()
	p := PodInstaller{Kube: kube, CA: tlstest.CA(t), Manifest: "- --initial-cluster=" + manifests.EtcdInitialClusterMarker,
		Image: "kiln.local/pause:3.10", Node: "m-1", IP: "10.66.0.12"}
	members := []*etcdserverpb.Member{
		{ID: 1, Name: "m-0", PeerURLs: []string{"https://10.66.0.11:2380"}},
		{ID: 2, PeerURLs: []string{PeerURL("10.66.0.12")}, IsLearner: true},
	}
	if !p.Lost(ctx) {
		t.Error("Lost before any install = false")
	}
	for range 2 {
		if err := p.Install(ctx, members, 2); err != nil {
			t.Fatal(err)
		}
	}
	secret, err := kube.CoreV1().Secrets(handover.SystemNamespace).Get(ctx, "etcd-m-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(secret.Data[ManifestFile]), "- --initial-cluster=m-0=https://10.66.0.11:2380,m-1=https://10.66.0.12:2380"; got != want {
		t.Errorf("static pod = %q, want %q", got, want)
	}
	var keys []string
	for k := range secret.Data {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if want := []string{CACert, ManifestFile, PeerCert, PeerKey, ServerCert, ServerKey}; !slices.Equal(keys, want) {
		t.Errorf("Secret keys = %q, want %q", keys, want)
	}
	block, _ := pem.Decode(secret.Data[PeerCert])
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(cert.IPAddresses, func(ip net.IP) bool { return ip.Equal(net.ParseIP(p.IP)) }) {
		t.Errorf("peer certificate for %v, want %s among them", cert.IPAddresses, p.IP)
	}
	pod, err := kube.CoreV1().Pods(handover.SystemNamespace).Get(ctx, "etcd-installer-m-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pod.Spec.NodeName != "m-1" || pod.Spec.Volumes[0].Secret.SecretName != secret.Name || pod.Spec.Containers[0].Image != p.Image {
		t.Errorf("installer pod on %q with Secret %q and image %q", pod.Spec.NodeName, pod.Spec.Volumes[0].Secret.SecretName, pod.Spec.Containers[0].Image)
	}

	if p.Lost(ctx) {
		t.Error("Lost with the installer pod pending = true")
	}
	pod.Status.Phase = corev1.PodFailed
	if _, err := kube.CoreV1().Pods(handover.SystemNamespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if !p.Lost(ctx) {
		t.Error("Lost with the installer pod failed = false")
	}

	for range 2 {
		if err := DeleteInstallerSecret(ctx, kube, "m-1"); err != nil {
			t.Fatalf("DeleteInstallerSecret: %v", err)
		}
	}
	if _, err := kube.CoreV1().Secrets(handover.SystemNamespace).Get(ctx, "etcd-m-1", metav1.GetOptions{}); err == nil {
		t.Error("the installer Secret (private keys) is still there")
	}
}
