package upgrade

import (
	"slices"
	"strings"
	"testing"
)

// A part of an API server's /metrics, as v1.35 prints it.
const testMetrics = `# HELP apiserver_requested_deprecated_apis [STABLE] Gauge of deprecated APIs that have been requested, broken out by API group, version, resource, subresource, and removed_release.
# TYPE apiserver_requested_deprecated_apis gauge
apiserver_requested_deprecated_apis{group="flowcontrol.apiserver.k8s.io",removed_release="1.36",resource="flowschemas",subresource="",version="v1beta3"} 1
apiserver_requested_deprecated_apis{group="",removed_release="1.36",resource="componentstatuses",subresource="",version="v1"} 1
apiserver_requested_deprecated_apis{group="example.k8s.io",removed_release="1.38",resource="widgets",subresource="status",version="v1beta1"} 1
apiserver_requested_deprecated_apis{group="old.k8s.io",removed_release="",resource="things",subresource="",version="v1alpha1"} 1
apiserver_requested_deprecated_apis{group="gone.k8s.io",removed_release="1.35",resource="gadgets",subresource="scale",version="v1beta2"} 0
apiserver_request_total{code="200",group="",resource="pods",verb="LIST",version="v1"} 12
`

func TestRemovedAPIs(t *testing.T) {
	got, err := RemovedAPIs(strings.NewReader(testMetrics), v("v1.36.3"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range got {
		names = append(names, r.String())
	}
	want := []string{
		"componentstatuses.v1 (removed in 1.36)",
		"flowschemas.v1beta3.flowcontrol.apiserver.k8s.io (removed in 1.36)",
	}
	if !slices.Equal(names, want) {
		t.Errorf("got %q, want %q", names, want)
	}
	later, err := RemovedAPIs(strings.NewReader(testMetrics), v("v1.38.0"))
	if err != nil {
		t.Fatal(err)
	}
	if len(later) != 3 || later[2].String() != "widgets/status.v1beta1.example.k8s.io (removed in 1.38)" {
		t.Errorf("target v1.38: got %v", later)
	}
	none, err := RemovedAPIs(strings.NewReader(testMetrics), v("v1.35.4"))
	if err != nil || len(none) != 0 {
		t.Errorf("target v1.35: got %v, %v; want none (a gauge at 0 is no request)", none, err)
	}
}
