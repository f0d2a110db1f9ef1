package kubeconfig

import (
	"testing"

	"github.com/kiln-project/kiln/assets/installconfig"
	"github.com/kiln-project/kiln/assets/installconfig/installconfigtest"
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
func testInstallConfig(vip string) *installconfig.InstallConfig { return installconfigtest.Local(vip) }
