package manifests

import (
	"context"

	"github.com/kiln-project/kiln/graph"
)

var _ graph.WritableAsset = (*MetricsServer)(nil)

const metricsServerTemplate = "cluster/14-metrics-server.yaml"

// MetricsServer is manifests/14-metrics-server.yaml: metrics-server and its
// APIService (metrics.k8s.io), verifying kubelets with the cluster's root
// CA. It holds no file when the install-config switches the metrics add-on
// off.
type MetricsServer struct{ objects }

// ID implements graph.Asset.
func (*MetricsServer) ID() string { return "manifests/metrics-server" }

// Name implements graph.Asset.
func (*MetricsServer) Name() string { return "metrics-server manifest" }

// Dependencies implements graph.Asset.
func (*MetricsServer) Dependencies() []graph.Asset { return valuesOnly() }

// Generate implements graph.Asset.
func (m *MetricsServer) Generate(_ context.Context, p graph.Parents) error {
	return m.generateIf(p, metricsServerTemplate, func(v *Values) bool { return v.Addons.Metrics })
}

// Load implements graph.WritableAsset.
func (m *MetricsServer) Load(f graph.FileFetcher) (bool, error) {
	return m.loadOne(f, metricsServerTemplate)
}
