package ignitionconfigs

import (
	"fmt"

	"github.com/kiln-project/kiln/assets/installconfig"
	"github.com/kiln-project/kiln/assets/tls"
	"github.com/kiln-project/kiln/graph"
	"github.com/kiln-project/kiln/ignition"
	"github.com/kiln-project/kiln/ignition/nodelayout"
)

// pointer is the base of master.ign and worker.ign: a config that merges
// the role's full config from the machine-config server behind api-int,
// trusting the root CA.
type pointer struct {
	File *graph.File `json:"file"`
}

func pointerDeps() []graph.Asset { return []graph.Asset{&installconfig.InstallConfig{}, &tls.RootCA{}} }

func (ptr *pointer) generate(p graph.Parents, role string) error {
	ic, ca := &installconfig.InstallConfig{}, &tls.RootCA{}
	if err := p.Get(ic, ca); err != nil {
		return err
	}
	url := fmt.Sprintf("https://%s:%d/config/%s", ic.Config.APIIntName(), nodelayout.MCSPort, role)
	data, err := ignition.Marshal(ignition.Pointer(url, ca.Cert))
	if err != nil {
		return err
	}
	ptr.File = &graph.File{Path: role + ".ign", Data: data}
	return nil
}

// Files implements graph.WritableAsset for the embedding asset.
func (ptr *pointer) Files() []*graph.File { return []*graph.File{ptr.File} }

func (ptr *pointer) load(f graph.FileFetcher, role string) (bool, error) {
	return loadIgnition(f, role+".ign", 0o644, &ptr.File)
}
