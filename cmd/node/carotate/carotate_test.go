package carotate

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	kilntls "github.com/kiln-project/kiln/assets/tls"
	"github.com/kiln-project/kiln/cmd/node/certinstall"
	"github.com/kiln-project/kiln/ignition/certbundle"
	"github.com/kiln-project/kiln/ignition/nodelayout"
)

func pod(name, args string) string {
	return "apiVersion: v1\nkind: Pod\nmetadata:\n  name: " + name + "\n  namespace: kube-system\nspec:\n  containers:\n  - name: " + name + "\n    command:\n" + args
}

// oldKCM is a kube-controller-manager manifest as kiln wrote it before the
// signing copies.
var oldKCM = pod("kube-controller-manager", `    - --cluster-signing-kubelet-serving-cert-file=/etc/kubernetes/pki/kubelet-serving-ca.crt
    - --cluster-signing-kubelet-serving-key-file=/etc/kubernetes/pki/kubelet-serving-ca.key
    - --cluster-signing-kubelet-client-cert-file=/etc/kubernetes/pki/ca.crt
    - --cluster-signing-kubelet-client-key-file=/etc/kubernetes/pki/ca.key
    - --cluster-signing-legacy-unknown-cert-file=/etc/kubernetes/pki/ca.crt
    - --cluster-signing-legacy-unknown-key-file=/etc/kubernetes/pki/ca.key
    - --root-ca-file=/etc/kubernetes/pki/ca.crt
    - --client-ca-file=/etc/kubernetes/pki/client-ca.crt
`)

type node struct {
	t        *testing.T
	root     string
	rotate   *Rotate
	restarts []string
	started  map[string]time.Time
	edited   map[string]time.Time
	now      time.Time
	// serving, when set, is the CA the fake kubelet gets a serving
	// certificate from when it restarts.
	serving *kilntls.CertKey
}

func (n *node) write(p string, data []byte, mode os.FileMode) {
	n.t.Helper()
	full := filepath.Join(n.root, p)
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		n.t.Fatal(err)
	}
	if err := os.WriteFile(full, data, mode); err != nil {
		n.t.Fatal(err)
	}
}

func (n *node) read(p string) []byte {
	data, err := os.ReadFile(filepath.Join(n.root, p))
	if err != nil {
		n.t.Fatal(err)
	}
	return data
}

func kubeconfig(t *testing.T, ca []byte) []byte {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["c"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:6443", CertificateAuthorityData: ca}
	cfg.AuthInfos["u"] = &clientcmdapi.AuthInfo{ClientCertificate: "/var/lib/kubelet/pki/kubelet-client-current.pem"}
	cfg.Contexts["x"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	cfg.CurrentContext = "x"
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func newCA(t *testing.T, id string) kilntls.CertKey {
	ck, err := kilntls.NewCA(context.Background(), kilntls.ECDSAP256, id)
	if err != nil {
		t.Fatal(err)
	}
	return ck
}

func kubeletPair(t *testing.T, ca kilntls.CertKey, name string) []byte {
	p, err := kilntls.IssueKubeletClient(context.Background(), kilntls.ECDSAP256, &ca, name, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return slices.Concat(p.Cert, p.Key)
}

// newNode is a master (or a worker) with the old CA's kubelet
// certificates and kubeconfigs, and fakes that restart what they are
// asked to.
func newNode(t *testing.T, master bool, oldRoot, oldServing kilntls.CertKey) *node {
	n := &node{t: t, root: t.TempDir(), started: map[string]time.Time{}, edited: map[string]time.Time{}, now: time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)}
	pki := nodelayout.KubeletPKIDir
	n.write(pki+"/kubelet-client-2026-01-01.pem", kubeletPair(t, oldRoot, "m-0"), 0o600)
	if err := os.Symlink("kubelet-client-2026-01-01.pem", filepath.Join(n.root, pki, "kubelet-client-current.pem")); err != nil {
		t.Fatal(err)
	}
	n.write(pki+"/kubelet-server-2026-01-01.pem", kubeletPair(t, oldServing, "m-0"), 0o600)
	if err := os.Symlink("kubelet-server-2026-01-01.pem", filepath.Join(n.root, pki, "kubelet-server-current.pem")); err != nil {
		t.Fatal(err)
	}
	n.write(nodelayout.KubeletKubeconfig, kubeconfig(t, oldRoot.Cert), 0o600)
	n.write(nodelayout.BootstrapKubeconfig, kubeconfig(t, oldRoot.Cert), 0o600)
	if master {
		n.write(nodelayout.KubeconfigDir+"/kube-scheduler.kubeconfig", kubeconfig(t, oldRoot.Cert), 0o600)
		for _, c := range StaticPods() {
			manifest := pod(c.Binary, "    - "+c.Binary+"\n")
			if c.Binary == "kube-controller-manager" {
				manifest = oldKCM
			}
			n.write(nodelayout.StaticPodDir+"/"+c.Manifest, []byte(manifest), 0o600)
		}
		n.write(nodelayout.PKIDir+"/apiserver.crt", []byte("serving"), 0o644)
	}
	n.write(nodelayout.KilnConfigDir+"/.keep", nil, 0o644)
	n.rotate = &Rotate{
		Root: n.root,
		// The kubelet starts a static pod again once its manifest
		// changed: its process is new after each edit.
		Started: func(binary string) (time.Time, bool, error) {
			for _, c := range StaticPods() {
				if c.Binary != binary {
					continue
				}
				info, err := os.Stat(filepath.Join(n.root, nodelayout.StaticPodDir, c.Manifest))
				if err != nil {
					return time.Time{}, false, nil
				}
				if info.ModTime() != n.edited[c.Manifest] {
					n.edited[c.Manifest] = info.ModTime()
					n.started[binary] = n.now.Add(time.Second)
				}
			}
			t, ok := n.started[binary]
			return t, ok, nil
		},
		Ready: func(context.Context, []byte) error { return nil },
		Restart: func(_ context.Context, unit string) error {
			n.restarts = append(n.restarts, unit)
			if unit == "kubelet.service" {
				for _, c := range StaticPods() {
					data, err := os.ReadFile(filepath.Join(n.root, nodelayout.StaticPodDir, c.Manifest))
					if _, ok := n.started[c.Binary]; err == nil && strings.Contains(string(data), certinstall.Annotation) && !ok {
						t.Errorf("the kubelet restarted before %s ran again", c.Binary)
					}
				}
				current := filepath.Join(n.root, pki, "kubelet-server-current.pem")
				if _, err := os.Lstat(current); err != nil && n.serving != nil {
					n.write(pki+"/kubelet-server-new.pem", kubeletPair(t, *n.serving, "m-0"), 0o600)
					if err := os.Symlink("kubelet-server-new.pem", current); err != nil {
						t.Fatal(err)
					}
				}
			}
			return nil
		},
		KubeletHealthy: func(context.Context) error { return nil },
		Now:            func() time.Time { return n.now },
		Poll:           time.Millisecond,
		Log:            logrus.New(),
	}
	return n
}

func TestRotationPhasesOnAMaster(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	root, ksca := (&kilntls.RootCA{}).ID(), (&kilntls.KubeletServingCA{}).ID()
	oldRoot, newRoot := newCA(t, root), newCA(t, root)
	oldKS, newKS := newCA(t, ksca), newCA(t, ksca)
	n := newNode(t, true, oldRoot, oldKS)
	bundleCA := slices.Concat(oldRoot.Cert, newRoot.Cert)

	// introduce: trust files, signing copies, the manifest moves to them.
	introduce := certbundle.Rotation{Run: "r1", Phase: certbundle.PhaseIntroduce, Rotating: true, KubeconfigCA: bundleCA, Files: []certbundle.File{
		{Path: nodelayout.PKIDir + "/ca.crt", Mode: 0o644, Data: bundleCA},
		{Path: nodelayout.SigningCA + ".crt", Mode: 0o644, Data: oldRoot.Cert},
		{Path: nodelayout.SigningCA + ".key", Mode: 0o600, Data: oldRoot.Key},
		{Path: nodelayout.SigningKubeletServingCA + ".crt", Mode: 0o644, Data: oldKS.Cert},
		{Path: nodelayout.SigningKubeletServingCA + ".key", Mode: 0o600, Data: oldKS.Key},
	}}
	if err := n.rotate.Do(ctx, introduce); err != nil {
		t.Fatal(err)
	}
	if got := n.read(nodelayout.PKIDir + "/ca.crt"); !bytes.Equal(got, bundleCA) {
		t.Error("ca.crt is not the bundle")
	}
	kcm := string(n.read(nodelayout.StaticPodDir + "/kube-controller-manager.yaml"))
	for _, want := range []string{
		"--cluster-signing-kubelet-serving-cert-file=/etc/kubernetes/pki/signing-kubelet-serving-ca.crt",
		"--cluster-signing-kubelet-client-key-file=/etc/kubernetes/pki/signing-ca.key",
		"--cluster-signing-legacy-unknown-cert-file=/etc/kubernetes/pki/signing-ca.crt",
		"--root-ca-file=/etc/kubernetes/pki/ca.crt",
		"--client-ca-file=/etc/kubernetes/pki/client-ca.crt",
		certinstall.Annotation + `: "r1-introduce"`,
	} {
		if !strings.Contains(kcm, want) {
			t.Errorf("the controller manager's manifest lacks %s:\n%s", want, kcm)
		}
	}
	for _, p := range []string{nodelayout.KubeletKubeconfig, nodelayout.BootstrapKubeconfig, nodelayout.KubeconfigDir + "/kube-scheduler.kubeconfig"} {
		cfg, err := clientcmd.Load(n.read(p))
		if err != nil {
			t.Fatal(err)
		}
		if got := cfg.Clusters["c"].CertificateAuthorityData; !bytes.Equal(got, bundleCA) {
			t.Errorf("%s: the CA is not the bundle", p)
		}
		if cfg.AuthInfos["u"].ClientCertificate == "" {
			t.Errorf("%s lost its user", p)
		}
	}
	if got := strings.TrimSpace(string(n.read(nodelayout.CARotationMarker))); got != "r1" {
		t.Errorf("marker %q", got)
	}
	if !slices.Equal(n.restarts, Units()) {
		t.Errorf("restarted %v, want %v", n.restarts, Units())
	}

	// kubelets: a new client certificate behind the same link name, the
	// old file untouched; a serving certificate from the new CA.
	oldClient := n.read(nodelayout.KubeletPKIDir + "/kubelet-client-2026-01-01.pem")
	n.serving = &newKS
	n.now = n.now.Add(time.Minute)
	kubelets := certbundle.Rotation{Run: "r1", Phase: certbundle.PhaseKubelets, Rotating: true, KubeconfigCA: bundleCA,
		KubeletClient: kubeletPair(t, newRoot, "m-0"), KubeletServingCA: newKS.Cert}
	if err := n.rotate.Do(ctx, kubelets); err != nil {
		t.Fatal(err)
	}
	link, err := os.Readlink(filepath.Join(n.root, nodelayout.KubeletPKIDir, "kubelet-client-current.pem"))
	if err != nil || link != "kubelet-client-r1.pem" {
		t.Errorf("client link -> %q, %v", link, err)
	}
	if !bytes.Equal(n.read(nodelayout.KubeletPKIDir+"/kubelet-client-2026-01-01.pem"), oldClient) {
		t.Error("the old client certificate was written through the link")
	}
	if err := signedBy(filepath.Join(n.root, nodelayout.KubeletPKIDir, "kubelet-client-current.pem"), newRoot.Cert); err != nil {
		t.Errorf("the client certificate: %v", err)
	}
	if err := signedBy(filepath.Join(n.root, nodelayout.KubeletPKIDir, "kubelet-server-current.pem"), newKS.Cert); err != nil {
		t.Errorf("the serving certificate: %v", err)
	}
	// Again: nothing more to do, and it does not wait forever.
	if err := n.rotate.Do(ctx, kubelets); err != nil {
		t.Fatal(err)
	}

	// A client certificate for another node is refused.
	other := kubelets
	other.Run = "r2"
	other.KubeletClient = kubeletPair(t, newRoot, "m-1")
	if err := n.rotate.Do(ctx, other); err == nil || !strings.Contains(err.Error(), "system:node:m-1") {
		t.Errorf("another node's client certificate: %v", err)
	}

	// retire: the marker goes.
	retire := certbundle.Rotation{Run: "r1", Phase: certbundle.PhaseRetire, KubeconfigCA: newRoot.Cert, Files: []certbundle.File{
		{Path: nodelayout.PKIDir + "/ca.crt", Mode: 0o644, Data: newRoot.Cert},
	}}
	if err := n.rotate.Do(ctx, retire); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(n.root, nodelayout.CARotationMarker)); !os.IsNotExist(err) {
		t.Errorf("the marker is still there: %v", err)
	}
}

func TestRotationWaitsForTheRestartedPods(t *testing.T) {
	root := (&kilntls.RootCA{}).ID()
	oldRoot, newRoot := newCA(t, root), newCA(t, root)
	n := newNode(t, true, oldRoot, newCA(t, (&kilntls.KubeletServingCA{}).ID()))
	n.write(nodelayout.SigningCA+".crt", oldRoot.Cert, 0o644)
	n.write(nodelayout.SigningCA+".key", oldRoot.Key, 0o600)
	n.write(nodelayout.SigningKubeletServingCA+".crt", oldRoot.Cert, 0o644)
	n.write(nodelayout.SigningKubeletServingCA+".key", oldRoot.Key, 0o600)
	n.rotate.Started = func(string) (time.Time, bool, error) { return n.now.Add(-time.Hour), true, nil } // nothing restarts
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	err := n.rotate.Do(ctx, certbundle.Rotation{Run: "r1", Phase: certbundle.PhaseIntroduce, Rotating: true, Files: []certbundle.File{
		{Path: nodelayout.PKIDir + "/ca.crt", Mode: 0o644, Data: slices.Concat(oldRoot.Cert, newRoot.Cert)},
	}})
	if err == nil || !strings.Contains(err.Error(), "etcd has not restarted yet") {
		t.Errorf("err = %v, want the wait to name etcd", err)
	}
}

func TestMigrateSigningNeedsTheCopies(t *testing.T) {
	root := t.TempDir()
	p := filepath.Join(root, nodelayout.StaticPodDir, "kube-controller-manager.yaml")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(oldKCM), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := MigrateSigning(root); err == nil || !strings.Contains(err.Error(), "signing-ca.crt") {
		t.Errorf("without the copies: %v", err)
	}
	if data, _ := os.ReadFile(p); string(data) != oldKCM {
		t.Error("the manifest changed although it could not be migrated")
	}
	if err := MigrateSigning(t.TempDir()); err != nil {
		t.Errorf("a worker (no manifest): %v", err)
	}
}

func TestRotationRefusesFilesOutsideItsPlace(t *testing.T) {
	n := newNode(t, false, newCA(t, (&kilntls.RootCA{}).ID()), newCA(t, (&kilntls.KubeletServingCA{}).ID()))
	for _, p := range []string{nodelayout.PKIDir + "/sa.key", "/etc/passwd", nodelayout.MCSConfigDir + "/tokens", nodelayout.PKIDir + "/../pki/ca.key"} {
		err := n.rotate.Do(context.Background(), certbundle.Rotation{Run: "r1", Phase: certbundle.PhaseIntroduce, Files: []certbundle.File{{Path: p, Data: []byte("x")}}})
		if err == nil {
			t.Errorf("%s: no error", p)
		}
	}
	if _, err := os.Stat(filepath.Join(n.root, nodelayout.CARotationMarker)); !os.IsNotExist(err) {
		t.Error("a refused bundle left the marker")
	}
}
