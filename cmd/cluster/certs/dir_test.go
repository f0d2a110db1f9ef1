package certs

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kiln-project/kiln/graph/installdir"
)

// writeFiles writes name -> content under dir.
func writeFiles(t *testing.T, dir string, files map[string][]byte) {
	t.Helper()
	for name, data := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// snapshot records every path under dir with its content and mtime.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		data := ""
		if d.Type().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			data = string(b)
		}
		out[p] = info.ModTime().String() + info.Mode().String() + data
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestFromDir(t *testing.T) {
	year := 365 * 24 * time.Hour
	root := issue(t, "kiln-root-ca", now.Add(10*year), nil, true)
	admin := issue(t, "system:admin", now.Add(year), &root, false)
	apiserver := issue(t, "kube-apiserver", now.Add(year), &root, false)
	edited := issue(t, "kube-apiserver", now.Add(2*year), &root, false)
	extra := issue(t, "extra", now.Add(year), &root, false)
	kubelet := issue(t, "system:node:w0", now.Add(year), &root, false)

	state := map[string]any{"version": 1, "assets": map[string]any{
		"tls/root-ca":      map[string]any{"hash": "x", "value": map[string]any{"cert": root.pemOf(), "key": []byte("secret")}},
		"tls/apiserver":    map[string]any{"hash": "x", "value": map[string]any{"cert": apiserver.pemOf()}},
		"tls/admin-client": map[string]any{"hash": "x", "value": map[string]any{"cert": admin.pemOf()}},
		"installconfig":    map[string]any{"hash": "x", "value": map[string]any{"metadata": map[string]any{"name": "dev"}}},
		"clusterid":        map[string]any{"hash": "x", "value": "not an object"},
	}}
	stateJSON, err := json.Marshal(state)
	if err != nil {
		t.Fatal(err)
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["dev"] = &clientcmdapi.Cluster{Server: "https://10.66.0.10:6443", CertificateAuthorityData: root.pemOf()}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: admin.pemOf(), ClientKeyData: []byte("secret")}
	kc.AuthInfos["kubelet"] = &clientcmdapi.AuthInfo{ClientCertificateData: kubelet.pemOf()}
	kcData, err := clientcmd.Write(*kc)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	writeFiles(t, dir, map[string][]byte{
		installdir.State:               stateJSON,
		"tls/root-ca.crt":              root.pemOf(),   // the state's: listed once
		"tls/apiserver.crt":            edited.pemOf(), // edited by the user: listed too
		"tls/apiserver.key":            []byte("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"),
		"tls/bundle.pem":               append(root.pemOf(), extra.pemOf()...),
		"auth/kubeconfig":              kcData,
		"install-config.yaml":          []byte("apiVersion: v1\nmetadata:\n  name: dev\n"),
		".kiln/consumed/tls/other.crt": issue(t, "hidden", now.Add(year), &root, false).pemOf(),
	})
	before := snapshot(t, dir)

	entries, err := FromDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Name)
	}
	want := []string{
		"tls/admin-client", "tls/apiserver", "tls/root-ca", // the state, by asset ID
		"auth/kubeconfig (user kubelet)", // the admin user's and cluster's certificates are the state's
		"tls/apiserver.crt",              // differs from the state's
		"tls/bundle.pem#2",               // its first certificate is the root CA
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("entries = %q, want %q", got, want)
	}
	if !entries[5].Cert.Equal(extra.cert) || !entries[4].Cert.Equal(edited.cert) {
		t.Error("entries hold the wrong certificates")
	}
	if !reflect.DeepEqual(snapshot(t, dir), before) {
		t.Error("FromDir changed --dir")
	}
}

func TestFromDirWithoutState(t *testing.T) {
	root := issue(t, "kiln-root-ca", now.Add(time.Hour), nil, true)
	dir := t.TempDir()
	writeFiles(t, dir, map[string][]byte{"tls/root-ca.crt": root.pemOf()})
	entries, err := FromDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name != "tls/root-ca.crt" {
		t.Errorf("entries = %v", entries)
	}
	if _, err := os.Stat(filepath.Join(dir, installdir.State)); err == nil {
		t.Error("FromDir created a state file")
	}
}

// TestFirstToExpire: of the assets asked for, the certificate that
// expires first; the others, and assets that hold none, are ignored.
func TestFirstToExpire(t *testing.T) {
	year := 365 * 24 * time.Hour
	root := issue(t, "kiln-root-ca", now.Add(10*year), nil, true)
	early := issue(t, "system:admin", now.Add(time.Hour), &root, false)
	late := issue(t, "kube-apiserver", now.Add(year), &root, false)
	earliest := issue(t, "not asked", now.Add(time.Minute), &root, false)
	state := map[string]any{"version": 1, "assets": map[string]any{
		"tls/root-ca":      map[string]any{"hash": "x", "value": map[string]any{"cert": root.pemOf()}},
		"tls/apiserver":    map[string]any{"hash": "x", "value": map[string]any{"cert": late.pemOf()}},
		"tls/admin-client": map[string]any{"hash": "x", "value": map[string]any{"cert": early.pemOf()}},
		"tls/other":        map[string]any{"hash": "x", "value": map[string]any{"cert": earliest.pemOf()}},
		"clusterid":        map[string]any{"hash": "x", "value": "not an object"},
	}}
	stateJSON, err := json.Marshal(state)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	writeFiles(t, dir, map[string][]byte{installdir.State: stateJSON})
	e, ok, err := FirstToExpire(dir, []string{"tls/apiserver", "tls/admin-client", "clusterid", "tls/absent"})
	if err != nil || !ok || e.Name != "tls/admin-client" || !e.Cert.Equal(early.cert) {
		t.Errorf("FirstToExpire = %s, %v, %v; want tls/admin-client", e.Name, ok, err)
	}
	if _, ok, err := FirstToExpire(dir, []string{"clusterid"}); ok || err != nil {
		t.Errorf("no certificate among the assets: ok %v, %v", ok, err)
	}
}
