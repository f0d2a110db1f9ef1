package ignitionconfigs

import (
	"fmt"
	"net"
	"strconv"

	"github.com/coreos/ignition/v2/config/v3_3/types"

	"github.com/kiln-project/kiln/assets/bootstraptoken"
	"github.com/kiln-project/kiln/assets/installconfig"
	"github.com/kiln-project/kiln/assets/installconfig/types/configs"
	"github.com/kiln-project/kiln/assets/tls"
	"github.com/kiln-project/kiln/graph"
	"github.com/kiln-project/kiln/graph/installdir"
	"github.com/kiln-project/kiln/ignition"
	"github.com/kiln-project/kiln/ignition/mcsauth"
	"github.com/kiln-project/kiln/ignition/nodelayout"
)

// pointer is the base of master.ign and worker.ign: a config that merges
// the role's full config from the machine-config server behind api-int
// (or the node's own proxy, types.Config.NodeProxy),
// trusting the root CA and presenting the role's token. The token makes the
// file a credential: it is written 0600.
type pointer struct {
	File *graph.File `json:"file"`
}

func pointerDeps() []graph.Asset {
	return []graph.Asset{&installconfig.InstallConfig{}, &tls.RootCA{}, &bootstraptoken.ConfigTokens{}}
}

func (ptr *pointer) generate(p graph.Parents, role string) error {
	ic, ca, tokens := &installconfig.InstallConfig{}, &tls.RootCA{}, &bootstraptoken.ConfigTokens{}
	if err := p.Get(ic, ca, tokens); err != nil {
		return err
	}
	server := net.JoinHostPort(ic.Config.APIIntName(), strconv.Itoa(nodelayout.MCSPort))
	if _, mcs, ok := configs.NodeProxy(ic.Config); ok {
		server = mcs
	}
	url := fmt.Sprintf("https://%s/config/%s", server, role)
	auth := mcsauth.HeaderValue(tokens.Token(role))
	data, err := ignition.Marshal(ignition.Pointer(url, ca.Cert, types.HTTPHeader{Name: mcsauth.Header, Value: &auth}))
	if err != nil {
		return err
	}
	ptr.File = &graph.File{Path: installdir.Ignition(role), Data: data, Mode: 0o600}
	return nil
}

// Files implements graph.WritableAsset for the embedding asset.
func (ptr *pointer) Files() []*graph.File { return []*graph.File{ptr.File} }

func (ptr *pointer) load(f graph.FileFetcher, role string) (bool, error) {
	return loadIgnition(f, installdir.Ignition(role), 0o600, &ptr.File)
}
