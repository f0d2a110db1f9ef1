package ignitionconfigs

import (
	"context"

	"github.com/kiln-project/kiln/assets/clusterid"
	"github.com/kiln-project/kiln/assets/installconfig"
	"github.com/kiln-project/kiln/assets/internal/adopted"
	"github.com/kiln-project/kiln/assets/manifests"
	"github.com/kiln-project/kiln/assets/tls"
	"github.com/kiln-project/kiln/graph"
	"github.com/kiln-project/kiln/ignition/nodelayout"
)

var (
	_ graph.AdoptionChecker = (*Bootstrap)(nil)
	_ graph.AdoptionChecker = (*Master)(nil)
	_ graph.AdoptionChecker = (*Worker)(nil)
)

// CheckAdopted implements graph.AdoptionChecker: a bootstrap.ign in --dir
// must hold only certificates of this cluster's CAs (or of install-config's
// additionalTrustBundle), and name this cluster and infra ID; the user's
// own manifests in it are theirs and not checked.
func (b *Bootstrap) CheckAdopted(_ context.Context, p graph.Parents) error {
	user := &manifests.UserManifests{}
	if err := p.Get(user); err != nil {
		return err
	}
	c, err := adopted.From(p, &tls.RootCA{}, &tls.EtcdCA{}, &tls.FrontProxyCA{}, &tls.KubeletServingCA{},
		&installconfig.InstallConfig{}, &clusterid.ClusterID{})
	if err != nil {
		return err
	}
	for _, f := range user.Files() {
		c.Ignore(nodelayout.BootstrapManifestsDir + "/" + baseName(f.Path))
	}
	return c.Check(b.File)
}

// CheckAdopted implements graph.AdoptionChecker for master.ign and
// worker.ign: the CA they trust for the machine-config server must be
// this cluster's root CA.
func (ptr *pointer) CheckAdopted(_ context.Context, p graph.Parents) error {
	c, err := adopted.From(p, &tls.RootCA{}, &installconfig.InstallConfig{})
	if err != nil {
		return err
	}
	return c.Check(ptr.File)
}
