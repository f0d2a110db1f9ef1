package upgrade

import (
	"context"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientscheme "k8s.io/client-go/kubernetes/scheme"
	metadatafake "k8s.io/client-go/metadata/fake"
)

// TestRemovedKinds reads the removal releases k8s.io/api's types carry:
// a kind removed by the target and after the running release is in, one
// removed before the running release (not served now) and one GA kind are
// not.
func TestRemovedKinds(t *testing.T) {
	got := RemovedKinds(clientscheme.Scheme, v("v1.36.3"), v("v1.37.0"))
	ipv1beta1 := schema.GroupVersionKind{Group: "networking.k8s.io", Version: "v1beta1", Kind: "IPAddress"}
	if got[ipv1beta1] != "1.37" {
		t.Errorf("%v: %q, want removed in 1.37", ipv1beta1, got[ipv1beta1])
	}
	for _, gvk := range []schema.GroupVersionKind{
		{Group: "networking.k8s.io", Version: "v1beta1", Kind: "Ingress"}, // removed in 1.22
		{Group: "networking.k8s.io", Version: "v1", Kind: "IPAddress"},
		{Version: "v1", Kind: "Pod"},
	} {
		if in, ok := got[gvk]; ok {
			t.Errorf("%v is listed (removed in %s)", gvk, in)
		}
	}
	if none := RemovedKinds(clientscheme.Scheme, v("v1.36.3"), v("v1.36.3")); len(none) != 0 {
		t.Errorf("a patch upgrade removes %v", none)
	}
}

// TestStoredObjects finds the objects a field manager or kubectl apply
// wrote through a removed version, not those written through the versions
// left, and names them with the manager.
func TestStoredObjects(t *testing.T) {
	scheme := metadatafake.NewTestScheme()
	if err := metav1.AddMetaToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	obj := func(kind, ns, name string, managers map[string]string, applied string) runtime.Object {
		o := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: kind},
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		for m, version := range managers {
			o.ManagedFields = append(o.ManagedFields, metav1.ManagedFieldsEntry{Manager: m, APIVersion: version, Operation: metav1.ManagedFieldsOperationUpdate})
		}
		if applied != "" {
			o.Annotations = map[string]string{"kubectl.kubernetes.io/last-applied-configuration": `{"apiVersion":"` + applied + `","kind":"` + kind + `"}`}
		}
		return o
	}
	meta := metadatafake.NewSimpleMetadataClient(scheme,
		obj("IPAddress", "", "10.0.0.5", map[string]string{"kube-apiserver": "networking.k8s.io/v1"}, ""),
		obj("IPAddress", "", "10.0.0.6", map[string]string{"kube-apiserver": "networking.k8s.io/v1", "old-operator": "networking.k8s.io/v1beta1"}, ""),
		obj("Ingress", "web", "front", nil, "networking.k8s.io/v1beta1"),
		obj("ServiceCIDR", "", "extra", nil, "networking.k8s.io/v1beta1"),
	)
	preferred := []*metav1.APIResourceList{{GroupVersion: "networking.k8s.io/v1", APIResources: []metav1.APIResource{
		{Name: "ipaddresses", Kind: "IPAddress", Verbs: []string{"get", "list"}},
		{Name: "ingresses", Kind: "Ingress", Namespaced: true, Verbs: []string{"get", "list"}},
		{Name: "ingresses/status", Kind: "Ingress", Namespaced: true, Verbs: []string{"get"}},
		{Name: "servicecidrs", Kind: "ServiceCIDR", Verbs: []string{"get", "list"}},
	}}}
	removed := map[schema.GroupVersionKind]string{
		{Group: "networking.k8s.io", Version: "v1beta1", Kind: "IPAddress"}:   "1.37",
		{Group: "networking.k8s.io", Version: "v1beta1", Kind: "ServiceCIDR"}: "1.37",
		{Group: "networking.k8s.io", Version: "v1beta1", Kind: "Ingress"}:     "1.37",
	}
	got, err := StoredObjects(context.Background(), meta, preferred, removed)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, o := range got {
		names = append(names, o.String())
	}
	want := []string{
		"ingresses.networking.k8s.io/front in namespace web, written by kubectl apply through networking.k8s.io/v1beta1 (removed in 1.37)",
		"ipaddresses.networking.k8s.io/10.0.0.6, written by old-operator through networking.k8s.io/v1beta1 (removed in 1.37)",
		"servicecidrs.networking.k8s.io/extra, written by kubectl apply through networking.k8s.io/v1beta1 (removed in 1.37)",
	}
	if !slices.Equal(names, want) {
		t.Errorf("got\n%q\nwant\n%q", names, want)
	}
}
