package ignitionconfigs_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/coreos/ignition/v2/config/v3_3/types"
	"github.com/vincent-petithory/dataurl"

	"github.com/kiln-project/kiln/assets/targets"
	"github.com/kiln-project/kiln/assets/tls"
	"github.com/kiln-project/kiln/graph"
	"github.com/kiln-project/kiln/graph/installdir"
	"github.com/kiln-project/kiln/ignition"
)

// TestKubeletServingCAStaysWithKubeletClients checks where the kubelet
// serving CA goes: its key only where kube-controller-manager runs, its
// certificate only to kube-apiserver (--kubelet-certificate-authority),
// kube-controller-manager and the kube-system ConfigMap metrics-server
// reads. No kubeconfig, service account ca.crt, pointer config or CA file
// that clients of the API server trust holds it, so a kubelet serving
// certificate never passes for the API server's.
func TestKubeletServingCAStaysWithKubeletClients(t *testing.T) {
	dir := newDir(t)
	persist(t, dir, targets.IgnitionConfigs())
	read := func(name string) []byte {
		t.Helper()
		raw, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return raw
	}
	boot := parse(t, read("bootstrap.ign"))
	configs := map[string]types.Config{
		"bootstrap": boot, "master": served(t, boot, "master"), "worker": served(t, boot, "worker"),
		"master pointer": parse(t, read("master.ign")), "worker pointer": parse(t, read("worker.ign")),
	}
	ca, root := &tls.KubeletServingCA{}, &tls.RootCA{}
	fromState(t, dir, ca, root)
	caPEM := ca.Cert
	caB64 := []byte(base64.StdEncoding.EncodeToString(caPEM))
	keyB64 := []byte(base64.StdEncoding.EncodeToString(ca.Key))

	allowed := map[string]bool{
		"/etc/kubernetes/pki/kubelet-serving-ca.crt":         true, // bootstrap, masters
		"/etc/kubernetes/pki/signing-kubelet-serving-ca.crt": true, // kube-controller-manager's copy
		"/opt/kiln/manifests/06-kubelet-serving-ca.yaml":     true, // the ConfigMap, bootstrap
		"/etc/kiln/mcs/master.ign":                           true, // the full master config, checked as "master"
	}
	for name, c := range configs {
		for _, f := range c.Storage.Files {
			data, ok, err := ignition.FileContents(c, f.Path)
			if err != nil || !ok {
				continue // a remote source: the pointers' merge
			}
			if (bytes.Contains(data, caPEM) || bytes.Contains(data, caB64)) && !allowed[f.Path] {
				t.Errorf("%s: %s holds the kubelet serving CA", name, f.Path)
			}
			keyAllowed := f.Path == "/etc/kubernetes/pki/kubelet-serving-ca.key" || f.Path == "/etc/kubernetes/pki/signing-kubelet-serving-ca.key" || f.Path == "/etc/kiln/mcs/master.ign"
			if (bytes.Contains(data, ca.Key) || bytes.Contains(data, keyB64)) && (!keyAllowed || name == "worker") {
				t.Errorf("%s: %s holds the kubelet serving CA key", name, f.Path)
			}
		}
		for _, ca := range c.Ignition.Security.TLS.CertificateAuthorities {
			u, err := dataurl.DecodeString(*ca.Source)
			if err != nil {
				t.Fatalf("%s: the Ignition TLS trust: %v", name, err)
			}
			if !bytes.Equal(u.Data, root.Cert) {
				t.Errorf("%s: the Ignition TLS trust is not the root CA alone", name)
			}
		}
	}
	if data := read("auth/kubeconfig"); bytes.Contains(data, caB64) || bytes.Contains(data, caPEM) {
		t.Errorf("auth/kubeconfig trusts the kubelet serving CA")
	}

	for role, c := range map[string]types.Config{"bootstrap": configs["bootstrap"], "master": configs["master"], "worker": configs["worker"]} {
		_, hasKey, _ := ignition.FileContents(c, "/etc/kubernetes/pki/kubelet-serving-ca.key")
		if want := role != "worker"; hasKey != want {
			t.Errorf("%s: has the kubelet serving CA key: %v, want %v", role, hasKey, want)
		}
		if role == "worker" {
			continue
		}
		if got := fileOf(t, c, "/etc/kubernetes/pki/kubelet-serving-ca.crt"); !bytes.Equal(got, caPEM) {
			t.Errorf("%s: /etc/kubernetes/pki/kubelet-serving-ca.crt is not tls/kubelet-serving-ca.crt", role)
		}
		for _, f := range c.Storage.Files {
			if f.Path == "/etc/kubernetes/pki/kubelet-serving-ca.key" && (f.Mode == nil || *f.Mode != 0o600) {
				t.Errorf("%s: the kubelet serving CA key is not 0600", role)
			}
		}
	}

	// Its signing copies are the CAs they copy, keys 0600.
	for copyPath, orig := range map[string]string{
		"/etc/kubernetes/pki/signing-kubelet-serving-ca.crt": "/etc/kubernetes/pki/kubelet-serving-ca.crt",
		"/etc/kubernetes/pki/signing-kubelet-serving-ca.key": "/etc/kubernetes/pki/kubelet-serving-ca.key",
		"/etc/kubernetes/pki/signing-ca.crt":                 "/etc/kubernetes/pki/ca.crt",
		"/etc/kubernetes/pki/signing-ca.key":                 "/etc/kubernetes/pki/ca.key",
	} {
		if !bytes.Equal(fileOf(t, boot, copyPath), fileOf(t, boot, orig)) {
			t.Errorf("%s is not a copy of %s", copyPath, orig)
		}
	}

	// kube-controller-manager hands pods the root CA as their service
	// account's ca.crt, and signs only kubelet serving certificates with
	// the kubelet serving CA.
	kcm := fileOf(t, boot, "/etc/kubernetes/manifests/kube-controller-manager.yaml")
	rootCA := fileOf(t, boot, flagOf(t, kcm, "root-ca-file"))
	if !bytes.Equal(rootCA, root.Cert) {
		t.Errorf("--root-ca-file (the service account ca.crt) is not the root CA")
	}
	for flag, want := range map[string]string{
		"cluster-signing-kubelet-serving-cert-file":       "/etc/kubernetes/pki/signing-kubelet-serving-ca.crt",
		"cluster-signing-kubelet-serving-key-file":        "/etc/kubernetes/pki/signing-kubelet-serving-ca.key",
		"cluster-signing-kubelet-client-cert-file":        "/etc/kubernetes/pki/signing-ca.crt",
		"cluster-signing-kube-apiserver-client-cert-file": "/etc/kubernetes/pki/signing-ca.crt",
		"cluster-signing-legacy-unknown-cert-file":        "/etc/kubernetes/pki/signing-ca.crt",
		"cluster-signing-cert-file":                       "", // excludes the per-signer files
	} {
		if got := flagOf(t, kcm, flag); got != want {
			t.Errorf("kube-controller-manager --%s=%q, want %q", flag, got, want)
		}
	}
}

// TestOldStateGetsAKubeletServingCA resumes a --dir whose state predates the
// kubelet serving CA (and the manifests that came with it): the CA is
// generated and placed, and every other key is kept.
func TestOldStateGetsAKubeletServingCA(t *testing.T) {
	dir := newDir(t)
	persist(t, dir, targets.IgnitionConfigs())
	path := filepath.Join(dir, installdir.State)
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var st graph.State
	if err := json.Unmarshal(raw, &st); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"tls/kubelet-serving-ca", "manifests/kubelet-serving-ca", "manifests/machines"} {
		if st.Assets[id] == nil {
			t.Fatalf("no %s in the state", id)
		}
		delete(st.Assets, id)
		for _, e := range st.Assets {
			delete(e.Parents, id)
		}
	}
	rootBefore := st.Assets["tls/root-ca"].Value
	if raw, err = json.Marshal(st); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}

	persist(t, dir, targets.IgnitionConfigs())
	ca, root := &tls.KubeletServingCA{}, &tls.RootCA{}
	fromState(t, dir, ca, root)
	var rootAfter tls.RootCA
	if err := json.Unmarshal(rootBefore, &rootAfter); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(rootAfter.Cert, root.Cert) {
		t.Error("the resume replaced the root CA")
	}
	raw, err = os.ReadFile(filepath.Join(dir, "bootstrap.ign"))
	if err != nil {
		t.Fatal(err)
	}
	if got := fileOf(t, parse(t, raw), "/etc/kubernetes/pki/kubelet-serving-ca.crt"); !bytes.Equal(got, ca.Cert) {
		t.Error("the resumed bootstrap config does not carry the new kubelet serving CA")
	}
}

// fromState reads assets from dir's state file; each must be there.
func fromState(t *testing.T, dir string, assets ...graph.Asset) {
	t.Helper()
	store, err := graph.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range assets {
		if found, err := store.FromState(a); err != nil || !found {
			t.Fatalf("%s not in the state: %v", a.ID(), err)
		}
	}
}
