package kubeconfig

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"strconv"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kiln-project/kiln/assets/installconfig"
	"github.com/kiln-project/kiln/assets/installconfig/types"
	"github.com/kiln-project/kiln/assets/installconfig/types/configs"
	"github.com/kiln-project/kiln/assets/internal/adopted"
	"github.com/kiln-project/kiln/assets/tls"
	"github.com/kiln-project/kiln/graph"
)

// APIPort is kube-apiserver's secure port.
const APIPort = 6443

// fileMode is the mode of every kubeconfig: they hold credentials.
const fileMode = 0o600

// Kubeconfig is the shared base of the kubeconfig assets: one file with one
// cluster, one user and one context, which is current.
type Kubeconfig struct {
	// File is the kubeconfig, mode 0600. It holds a credential: never log it.
	File *graph.File `json:"file"`
}

// String keeps the credentials out of formatted output.
func (k *Kubeconfig) String() string {
	if k.File == nil {
		return "kubeconfig (empty)"
	}
	return "kubeconfig " + k.File.Path
}

// GoString keeps the credentials out of %#v output.
func (k *Kubeconfig) GoString() string { return k.String() }

// CheckAdopted implements graph.AdoptionChecker for the embedding asset: a
// kubeconfig in --dir must trust this cluster's root CA, and its client
// certificate must be issued by it.
func (k *Kubeconfig) CheckAdopted(_ context.Context, p graph.Parents) error {
	c, err := adopted.From(p, &tls.RootCA{}, &installconfig.InstallConfig{})
	if err != nil {
		return err
	}
	return c.Check(k.File)
}

// InputKind implements graph.Sized for the embedding asset.
func (*Kubeconfig) InputKind() graph.Input { return graph.KubeconfigInput }

// Files implements graph.WritableAsset for the embedding asset.
func (k *Kubeconfig) Files() []*graph.File {
	if k.File == nil {
		return nil
	}
	return []*graph.File{k.File}
}

// entry is what one kubeconfig holds.
type entry struct {
	path    string // in --dir
	cluster string // cluster name
	server  string // https URL of kube-apiserver
	ca      []byte // PEM CA bundle that verifies server
	user    string // user entry and context name
	auth    *clientcmdapi.AuthInfo
}

// clientCert returns AuthInfo for a client certificate.
func clientCert(ck *tls.CertKey) *clientcmdapi.AuthInfo {
	return &clientcmdapi.AuthInfo{ClientCertificateData: ck.Cert, ClientKeyData: ck.Key}
}

// generate builds the kubeconfig of e with clientcmd.
func (k *Kubeconfig) generate(e entry) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[e.cluster] = &clientcmdapi.Cluster{Server: e.server, CertificateAuthorityData: e.ca}
	cfg.AuthInfos[e.user] = e.auth
	cfg.Contexts[e.user] = &clientcmdapi.Context{Cluster: e.cluster, AuthInfo: e.user}
	cfg.CurrentContext = e.user
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		return fmt.Errorf("serialise kubeconfig %s: %w", e.path, err)
	}
	k.File = &graph.File{Path: e.path, Data: data, Mode: fileMode}
	return nil
}

// load reads a kubeconfig the user put at path in --dir; it must parse and
// have a current context that names a cluster and a user.
func (k *Kubeconfig) load(f graph.FileFetcher, path string) (bool, error) {
	file, err := f.FetchByName(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return true, &graph.InputError{Err: err}
	}
	cfg, err := clientcmd.Load(file.Data)
	if err != nil {
		return true, &graph.InputError{Err: fmt.Errorf("%s: not a kubeconfig: %w", path, err)}
	}
	ctx := cfg.Contexts[cfg.CurrentContext]
	if ctx == nil || cfg.Clusters[ctx.Cluster] == nil || cfg.AuthInfos[ctx.AuthInfo] == nil {
		return true, &graph.InputError{Err: fmt.Errorf("%s: current-context %q must name a context whose cluster and user exist",
			path, cfg.CurrentContext)}
	}
	k.File = &graph.File{Path: path, Data: file.Data, Mode: fileMode}
	return true, nil
}

// serverURL returns https://host:APIPort.
func serverURL(host string) string {
	return "https://" + net.JoinHostPort(host, strconv.Itoa(APIPort))
}

// externalServer is where the user reaches the API: the API VIP when the
// platform has one (it is in the serving certificate), so that the admin
// kubeconfig works on a host that cannot resolve api.<name>.<baseDomain>;
// else that name.
func externalServer(cfg *types.Config) string {
	if vip := configs.APIVIP(cfg); vip != "" {
		return serverURL(vip)
	}
	return serverURL(cfg.APIName())
}

// InternalAPI is host:port where the nodes reach the API: the proxy on
// their own loopback interface on a platform that runs one, else api-int,
// the platform's (or the user's) load balancer.
func InternalAPI(cfg *types.Config) string {
	if api, _, ok := configs.NodeProxy(cfg); ok {
		return api
	}
	return net.JoinHostPort(cfg.APIIntName(), strconv.Itoa(APIPort))
}

// InternalServer is the URL of InternalAPI.
func InternalServer(cfg *types.Config) string { return "https://" + InternalAPI(cfg) }

// localServer is the API on the same machine, for components on masters.
func localServer() string { return serverURL("localhost") }
