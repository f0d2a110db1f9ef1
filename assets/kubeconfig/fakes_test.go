package kubeconfig

import (
	"testing"

	"github.com/kiln-project/kiln/assets/installconfig"
	"github.com/kiln-project/kiln/assets/installconfig/types"
	"github.com/kiln-project/kiln/graph"
	"github.com/kiln-project/kiln/graph/graphtest"
)

// fakeFetcher is an in-memory --dir.
type fakeFetcher = graphtest.Fetcher

// generate runs a.Generate with the given values for its dependencies.
func generate(t testing.TB, a graph.Asset, values ...graph.Asset) {
	t.Helper()
	graphtest.Generate(t, a, values...)
}

// testInstallConfig returns an install-config with an API VIP, or without
// one when vip is empty.
func testInstallConfig(vip string) *installconfig.InstallConfig {
	return &installconfig.InstallConfig{Config: &types.Config{
		APIVersion: types.APIVersion,
		Metadata:   types.Metadata{Name: "demo"},
		BaseDomain: "example.test",
		Networking: &types.Networking{ServiceNetwork: []string{"172.30.0.0/16"}},
		Platform:   types.Platform{Local: &types.LocalPlatform{APIVIP: vip}},
	}}
}
