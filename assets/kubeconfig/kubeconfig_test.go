package kubeconfig

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/kiln-project/kiln/assets/bootstraptoken"
	"github.com/kiln-project/kiln/assets/tls"
	"github.com/kiln-project/kiln/graph"
	"github.com/kiln-project/kiln/graph/installdir"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// placeholder returns a CertKey whose contents name it, so that golden files
// are stable.
func placeholder(name string) tls.CertKey {
	return tls.CertKey{Cert: []byte("<" + name + ".crt>"), Key: []byte("<" + name + ".key>")}
}

// asset is a kubeconfig asset.
type asset interface {
	graph.WritableAsset
	kubeconfig() *Kubeconfig
}

func (k *Kubeconfig) kubeconfig() *Kubeconfig { return k }

// placeholderParents are dependencies with placeholder credentials.
func placeholderParents(vip string) []graph.Asset {
	return []graph.Asset{
		testInstallConfig(vip),
		&tls.RootCA{CertKey: placeholder("root-ca")},
		&tls.AdminClient{CertKey: placeholder("admin-client")},
		&tls.KubeControllerManagerClient{CertKey: placeholder("kube-controller-manager-client")},
		&tls.KubeSchedulerClient{CertKey: placeholder("kube-scheduler-client")},
		&bootstraptoken.BootstrapToken{TokenID: "abcdef", TokenSecret: "0123456789abcdef", Expiration: time.Unix(0, 0)},
	}
}

// kubeconfigTests lists every kubeconfig with its expected REST config.
func kubeconfigTests() []struct {
	golden, vip, path, host, token string
	a                              asset
	cert                           string
} {
	return []struct {
		golden, vip, path, host, token string
		a                              asset
		cert                           string
	}{
		{"admin-vip", "192.168.126.10", installdir.AdminKubeconfig, "https://192.168.126.10:6443", "", &Admin{}, "admin-client"},
		{"admin-vip6", "fd00::10", installdir.AdminKubeconfig, "https://[fd00::10]:6443", "", &Admin{}, "admin-client"},
		{"admin-dns", "", installdir.AdminKubeconfig, "https://api.demo.example.test:6443", "", &Admin{}, "admin-client"},
		{"kubelet-bootstrap", "192.168.126.10", installdir.KubeletBootstrapKubeconfig, "https://api-int.demo.example.test:6443",
			"abcdef.0123456789abcdef", &KubeletBootstrap{}, ""},
		{"localhost", "", installdir.LocalhostKubeconfig, "https://localhost:6443", "", &Localhost{}, "admin-client"},
		{"kube-controller-manager", "", installdir.ControllerManagerKubeconfig, "https://localhost:6443", "",
			&KubeControllerManager{}, "kube-controller-manager-client"},
		{"kube-scheduler", "", installdir.SchedulerKubeconfig, "https://localhost:6443", "", &KubeScheduler{}, "kube-scheduler-client"},
	}
}

func TestKubeconfigs(t *testing.T) {
	for _, tt := range kubeconfigTests() {
		t.Run(tt.golden, func(t *testing.T) {
			generate(t, tt.a, placeholderParents(tt.vip)...)
			files := tt.a.Files()
			if len(files) != 1 || files[0].Path != tt.path || files[0].Mode != 0o600 {
				t.Fatalf("files %v, want only %s with mode 0600", files, tt.path)
			}
			data := files[0].Data
			golden := filepath.Join("testdata", tt.golden+".yaml")
			if *update {
				if err := os.WriteFile(golden, data, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(data, want) {
				t.Errorf("kubeconfig differs from %s (go test -update to accept):\n%s", golden, data)
			}

			rc, err := clientcmd.RESTConfigFromKubeConfig(data)
			if err != nil {
				t.Fatal(err)
			}
			if rc.Host != tt.host || rc.BearerToken != tt.token || string(rc.CAData) != "<root-ca.crt>" {
				t.Errorf("REST config host %q token %q CA %q; want %q, %q, the root CA", rc.Host, rc.BearerToken, rc.CAData, tt.host, tt.token)
			}
			wantCert, wantKey := "", ""
			if tt.cert != "" {
				wantCert, wantKey = "<"+tt.cert+".crt>", "<"+tt.cert+".key>"
			}
			if string(rc.CertData) != wantCert || string(rc.KeyData) != wantKey {
				t.Errorf("client certificate %q key %q, want %q %q", rc.CertData, rc.KeyData, wantCert, wantKey)
			}
		})
	}
}

func TestLoad(t *testing.T) {
	var valid Admin
	generate(t, &valid, placeholderParents("")...)
	tests := []struct {
		name      string
		files     fakeFetcher
		wantFound bool
		wantErr   bool
	}{
		{"absent", fakeFetcher{}, false, false},
		{"valid", fakeFetcher{installdir.AdminKubeconfig: valid.File.Data}, true, false},
		{"not YAML", fakeFetcher{installdir.AdminKubeconfig: []byte("{")}, true, true},
		{"no current context", fakeFetcher{installdir.AdminKubeconfig: []byte("apiVersion: v1\nkind: Config\n")}, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var a Admin
			found, err := a.Load(tt.files)
			if found != tt.wantFound || (err != nil) != tt.wantErr {
				t.Fatalf("Load = %v, %v; want found %v, error %v", found, err, tt.wantFound, tt.wantErr)
			}
			if tt.wantErr && !graph.IsInputError(err) {
				t.Errorf("%v: not an input error", err)
			}
			if found && !tt.wantErr && (!bytes.Equal(a.File.Data, valid.File.Data) || a.File.Mode != 0o600) {
				t.Error("loaded file differs from the one on disk or is not 0600")
			}
		})
	}
}
