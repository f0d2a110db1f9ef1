package manifests

import (
	"context"

	"sigs.k8s.io/yaml"

	"github.com/kiln-project/kiln/assets/bootstraptoken"
	"github.com/kiln-project/kiln/graph"
)

var _ graph.WritableAsset = (*BootstrapTokenSecret)(nil)

// bootstrapTokenPath is the file of BootstrapTokenSecret.
const bootstrapTokenPath = ManifestsDir + "/02-bootstrap-token.yaml"

// BootstrapTokenSecret is manifests/02-bootstrap-token.yaml: the Secret
// that makes the kubelets' bootstrap token valid. It holds the token: the
// file is 0600 and never logged.
type BootstrapTokenSecret struct{ fileSet }

// ID implements graph.Asset.
func (*BootstrapTokenSecret) ID() string { return "manifests/bootstrap-token" }

// Name implements graph.Asset.
func (*BootstrapTokenSecret) Name() string { return "bootstrap token Secret manifest" }

// Dependencies implements graph.Asset.
func (*BootstrapTokenSecret) Dependencies() []graph.Asset {
	return []graph.Asset{&bootstraptoken.BootstrapToken{}}
}

// Generate implements graph.Asset.
func (s *BootstrapTokenSecret) Generate(_ context.Context, p graph.Parents) error {
	tok := &bootstraptoken.BootstrapToken{}
	if err := p.Get(tok); err != nil {
		return err
	}
	data, err := yaml.Marshal(tok.Secret())
	if err != nil {
		return err
	}
	s.FileList = []*graph.File{{Path: bootstrapTokenPath, Data: data, Mode: 0o600}}
	return nil
}

// Load implements graph.WritableAsset.
func (s *BootstrapTokenSecret) Load(f graph.FileFetcher) (bool, error) {
	found, err := s.load(f, []string{bootstrapTokenPath}, CheckObjects)
	if found {
		s.FileList[0].Mode = 0o600
	}
	return found, err
}
