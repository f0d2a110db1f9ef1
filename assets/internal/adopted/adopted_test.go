package adopted_test

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/kiln-project/kiln/assets/clusterid"
	"github.com/kiln-project/kiln/assets/installconfig"
	"github.com/kiln-project/kiln/assets/installconfig/types"
	"github.com/kiln-project/kiln/assets/internal/adopted"
	"github.com/kiln-project/kiln/assets/tls"
	"github.com/kiln-project/kiln/graph"
	"github.com/kiln-project/kiln/graph/graphtest"
	"github.com/kiln-project/kiln/ignition"
)

// pair is a certificate with its key, to sign others.
type pair struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

// newCert issues a certificate for cn, a CA when isCA, signed by parent
// (self-signed when nil).
func newCert(t *testing.T, cn string, isCA bool, parent *pair) *pair {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: isCA, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageDigitalSignature,
	}
	if isCA {
		tmpl.KeyUsage |= x509.KeyUsageCertSign
	}
	signer, signerKey := tmpl, key
	if parent != nil {
		signer, signerKey = parent.cert, parent.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer, &key.PublicKey, signerKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &pair{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// kubeconfig is a kubeconfig trusting ca with client certificate client.
func kubeconfig(ca, client []byte) []byte {
	b64 := base64.StdEncoding.EncodeToString
	return []byte("apiVersion: v1\nkind: Config\nclusters:\n- cluster:\n    certificate-authority-data: " + b64(ca) +
		"\n    server: https://api.dev.example.com:6443\n  name: dev\nusers:\n- name: admin\n  user:\n    client-certificate-data: " +
		b64(client) + "\n    client-key-data: " + b64([]byte("-----BEGIN PRIVATE KEY-----\nAA==\n-----END PRIVATE KEY-----\n")) + "\n")
}

// ign is an Ignition config writing files (path, content pairs).
func ign(t *testing.T, files ...string) []byte {
	t.Helper()
	c := ignition.New()
	for i := 0; i+1 < len(files); i += 2 {
		ignition.AddFile(&c, files[i], 0o600, []byte(files[i+1]))
	}
	b, err := ignition.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestCheck(t *testing.T) {
	root := newCert(t, "kiln-root-ca", true, nil)
	etcd := newCert(t, "kiln-etcd-ca", true, nil)
	other := newCert(t, "kiln-root-ca", true, nil) // another cluster's root CA
	corp := newCert(t, "corp-ca", true, nil)       // in additionalTrustBundle
	admin := newCert(t, "system:admin", false, root)
	otherAdmin := newCert(t, "system:admin", false, other)
	inter := newCert(t, "intermediate", true, root)
	viaInter := newCert(t, "apiserver", false, inter)
	corpLeaf := newCert(t, "proxy.corp", false, corp)
	etcdPeer := newCert(t, "etcd-peer", false, etcd)
	padding := strings.Repeat("# padding, so the file is gzip-compressed\n", 200)

	ic := &installconfig.InstallConfig{Config: &types.Config{Metadata: types.Metadata{Name: "dev"}, AdditionalTrustBundle: string(corp.pem)}}
	cid := &clusterid.ClusterID{UUID: "1111-2222", InfraID: "dev-abcde"}
	parents := &graphtest.Parents{Declared: map[string]bool{}, Values: map[string]graph.Asset{}}
	for _, a := range []graph.Asset{ic, cid, &tls.RootCA{CertKey: tls.CertKey{Cert: root.pem}}, &tls.EtcdCA{CertKey: tls.CertKey{Cert: etcd.pem}}} {
		parents.Declared[a.ID()], parents.Values[a.ID()] = true, a
	}
	all := []graph.Asset{&tls.RootCA{}, &tls.EtcdCA{}, &installconfig.InstallConfig{}, &clusterid.ClusterID{}}

	tests := []struct {
		name    string
		against []graph.Asset
		ignore  []string
		file    string
		data    []byte
		want    *adopted.MismatchError // nil: no error; Problem is a prefix
	}{
		{name: "this cluster's kubeconfig", file: "auth/kubeconfig", data: kubeconfig(root.pem, admin.pem)},
		{name: "another cluster's kubeconfig", file: "auth/kubeconfig", data: kubeconfig(other.pem, otherAdmin.pem),
			want: &adopted.MismatchError{File: "auth/kubeconfig", Item: "clusters[0].cluster.certificate-authority-data",
				Problem: `certificate "kiln-root-ca" does not chain to this cluster's CAs (tls/root-ca, tls/etcd-ca, install-config's additionalTrustBundle)`, More: 1}},
		{name: "client certificate of another CA", file: "auth/kubeconfig", data: kubeconfig(root.pem, otherAdmin.pem),
			want: &adopted.MismatchError{File: "auth/kubeconfig", Item: "users[0].user.client-certificate-data", Problem: `certificate "system:admin" does not chain`}},
		{name: "chain through an intermediate in the same file", file: "tls.crt", data: append(viaInter.pem, inter.pem...)},
		{name: "intermediate missing", file: "tls.crt", data: viaInter.pem,
			want: &adopted.MismatchError{File: "tls.crt", Problem: `certificate "apiserver" does not chain`}},
		{name: "additionalTrustBundle", file: "bundle.pem", data: append(corp.pem, corpLeaf.pem...)},
		{name: "every CA counts", file: "etcd.crt", data: etcdPeer.pem},
		{name: "nested, compressed Ignition config", file: "bootstrap.ign",
			data: ign(t, "/etc/kiln/mcs/master.ign", string(ign(t, "/etc/kubernetes/pki/ca.crt", string(root.pem),
				"/etc/kubernetes/pki/apiserver.crt", padding+string(otherAdmin.pem)))),
			want: &adopted.MismatchError{File: "bootstrap.ign", Item: "/etc/kiln/mcs/master.ign > /etc/kubernetes/pki/apiserver.crt",
				Problem: `certificate "system:admin" does not chain`}},
		{name: "kubeconfig in an Ignition config", file: "bootstrap.ign",
			data: ign(t, "/etc/kubernetes/kubeconfigs/admin.kubeconfig", string(kubeconfig(root.pem, otherAdmin.pem))),
			want: &adopted.MismatchError{File: "bootstrap.ign", Item: "/etc/kubernetes/kubeconfigs/admin.kubeconfig users[0].user.client-certificate-data",
				Problem: `certificate "system:admin" does not chain`}},
		{name: "the user's own manifest is theirs", file: "bootstrap.ign", ignore: []string{"/opt/kiln/manifests/50-webhook.yaml"},
			data: ign(t, "/opt/kiln/manifests/50-webhook.yaml", "caBundle: "+base64.StdEncoding.EncodeToString(other.pem)+"\n")},
		{name: "pointer config trusting another CA", file: "master.ign",
			data: func() []byte {
				b, _ := ignition.Marshal(ignition.Pointer("https://api-int.dev.example.com:22623/config/master", other.pem))
				return b
			}(),
			want: &adopted.MismatchError{File: "master.ign", Item: "ignition.security.tls.certificateAuthorities[0]", Problem: `certificate "kiln-root-ca" does not chain`}},
		{name: "this cluster's metadata.json", file: "metadata.json",
			data: []byte(`{"clusterName": "dev", "clusterID": "1111-2222", "infraID": "dev-abcde", "platform": "none"}`)},
		{name: "another cluster's metadata.json", file: "metadata.json",
			data: []byte("{\"clusterName\": \"dev\",\n \"clusterID\": \"3333-4444\",\n \"infraID\": \"dev-zzzzz\"}"),
			want: &adopted.MismatchError{File: "metadata.json", Item: "clusterID", Problem: `clusterID is "3333-4444", this cluster's is "1111-2222"`, More: 1}},
		{name: "cluster-config in an Ignition config", file: "bootstrap.ign",
			data: ign(t, "/opt/kiln/manifests/03-cluster-config.yaml", "kind: ConfigMap\ndata:\n  clusterName: prod\n  infraID: dev-abcde\n"),
			want: &adopted.MismatchError{File: "bootstrap.ign", Item: "/opt/kiln/manifests/03-cluster-config.yaml data.clusterName",
				Problem: `clusterName is "prod", this cluster's is "dev"`}},
		{name: "certificates unchecked without a CA to check them against", against: []graph.Asset{&clusterid.ClusterID{}},
			file: "manifests/50-x.yaml", data: other.pem},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			against := tc.against
			if against == nil {
				against = all
			}
			c, err := adopted.From(parents, against...)
			if err != nil {
				t.Fatal(err)
			}
			c.Ignore(tc.ignore...)
			err = c.Check(&graph.File{Path: tc.file, Data: tc.data})
			if tc.want == nil {
				if err != nil {
					t.Fatalf("Check = %v, want nil", err)
				}
				return
			}
			var me *adopted.MismatchError
			if !errors.As(err, &me) || !graph.IsInputError(err) {
				t.Fatalf("Check = %v, want an input error with a *MismatchError", err)
			}
			if me.File != tc.want.File || me.Item != tc.want.Item || !strings.HasPrefix(me.Problem, tc.want.Problem) || me.More != tc.want.More {
				t.Errorf("mismatch %+v\nwant      %+v", *me, *tc.want)
			}
		})
	}
}

// The message names the file, the item, the count of the others and the
// way out.
func TestMismatchErrorMessage(t *testing.T) {
	e := &adopted.MismatchError{File: "bootstrap.ign", Item: "/etc/kubernetes/pki/apiserver.crt",
		Problem: `certificate "kube-apiserver" does not chain to this cluster's CAs (tls/root-ca)`, More: 32}
	want := `bootstrap.ign: /etc/kubernetes/pki/apiserver.crt: certificate "kube-apiserver" does not chain to this cluster's CAs (tls/root-ca) ` +
		`(32 more items of it disagree too). It was made for another cluster, or from a state kiln no longer holds: ` +
		`remove bootstrap.ign to have kiln write it for this cluster, or restore the state file it was made with`
	if got := e.Error(); got != want {
		t.Errorf("Error() = %s\nwant       %s", got, want)
	}
	if !bytes.Contains([]byte((&adopted.MismatchError{File: "f", Problem: "p", More: 1}).Error()), []byte("(one more item of it disagrees too)")) {
		t.Errorf("one more item is not counted in the singular")
	}
}

// Asking for an asset that is not an ancestor is an error, as in Generate.
func TestFromRefusesUndeclared(t *testing.T) {
	if _, err := adopted.From(&graphtest.Parents{Declared: map[string]bool{}}, &tls.RootCA{}); err == nil {
		t.Error("From read an undeclared asset")
	}
}
