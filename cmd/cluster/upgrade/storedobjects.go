package upgrade

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/metadata"

	"github.com/kiln-project/kiln/assets/release"
)

// StoredObject is an object of the cluster last written through an API
// version that a target release no longer serves: the manifest or client
// that wrote it (its field manager) fails once the target serves the
// cluster. The object itself stays readable through the versions left.
type StoredObject struct {
	// API is the removed version, with the resource the object is of.
	API RemovedAPI
	// Namespace and Name name the object; Namespace is "" for a
	// cluster-scoped one.
	Namespace, Name string
	// Manager is the field manager that wrote it through API, or
	// "kubectl apply" when its last-applied-configuration names API.
	Manager string
}

// String names the object as kubectl would, with the removed version and
// the manager that used it.
func (o StoredObject) String() string {
	name := o.API.Resource + "/" + o.Name
	if o.API.Group != "" {
		name = o.API.Resource + "." + o.API.Group + "/" + o.Name
	}
	if o.Namespace != "" {
		name += " in namespace " + o.Namespace
	}
	return fmt.Sprintf("%s, written by %s through %s (removed in %s)", name, o.Manager,
		schema.GroupVersion{Group: o.API.Group, Version: o.API.Version}, o.API.RemovedIn)
}

// lifecycleRemoved is what the generated prerelease-lifecycle code of a
// k8s.io/api type implements: the release whose API server no longer
// serves it (its removed_release in the API server's metrics).
type lifecycleRemoved interface {
	APILifecycleRemoved() (major, minor int)
}

// RemovedKinds returns the kinds of scheme that a cluster running from
// serves no longer once it runs target: those whose lifecycle says they
// are removed after from's minor and by target's. Each maps to the
// release that removes it ("1.36"). Kinds removed by from already are
// left out: the cluster does not serve them now, so nothing new breaks.
func RemovedKinds(scheme *runtime.Scheme, from, target release.Version) map[schema.GroupVersionKind]string {
	out := map[schema.GroupVersionKind]string{}
	for gvk, t := range scheme.AllKnownTypes() {
		obj, ok := reflect.New(t).Interface().(lifecycleRemoved)
		if !ok {
			continue
		}
		major, minor := obj.APILifecycleRemoved()
		removed := release.Version{Major: major, Minor: minor}
		if removed.Compare(release.Version{Major: from.Major, Minor: from.Minor}) > 0 && removed.Compare(release.Version{Major: target.Major, Minor: target.Minor}) <= 0 {
			out[gvk] = strconv.Itoa(major) + "." + strconv.Itoa(minor)
		}
	}
	return out
}

// StoredObjects lists the objects of each resource in preferred (the API
// server's preferred resources, from discovery) whose kind a version of
// removed has, and returns those that a field manager wrote through that
// version, or whose last-applied-configuration names it, sorted. Only
// object metadata is read, a page at a time.
func StoredObjects(ctx context.Context, meta metadata.Interface, preferred []*metav1.APIResourceList, removed map[schema.GroupVersionKind]string) ([]StoredObject, error) {
	type groupKind struct{ group, kind string }
	wanted := map[groupKind]bool{}
	for gvk := range removed {
		wanted[groupKind{gvk.Group, gvk.Kind}] = true
	}
	var out []StoredObject
	for _, list := range preferred {
		gv, err := schema.ParseGroupVersion(list.GroupVersion)
		if err != nil {
			continue
		}
		for _, r := range list.APIResources {
			if !wanted[groupKind{gv.Group, r.Kind}] || !slices.Contains(r.Verbs, "list") || strings.Contains(r.Name, "/") {
				continue
			}
			found, err := storedIn(ctx, meta, gv.WithResource(r.Name), r.Kind, removed)
			if err != nil {
				return out, err
			}
			out = append(out, found...)
		}
	}
	slices.SortFunc(out, func(a, b StoredObject) int {
		return cmp.Or(cmp.Compare(a.API.String(), b.API.String()), cmp.Compare(a.Namespace, b.Namespace),
			cmp.Compare(a.Name, b.Name), cmp.Compare(a.Manager, b.Manager))
	})
	return slices.Compact(out), nil
}

// storedIn returns the objects of resource gvr (of kind) written through
// a removed version of kind.
func storedIn(ctx context.Context, meta metadata.Interface, gvr schema.GroupVersionResource, kind string, removed map[schema.GroupVersionKind]string) ([]StoredObject, error) {
	var out []StoredObject
	opts := metav1.ListOptions{Limit: 500}
	for {
		page, err := meta.Resource(gvr).List(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("listing %s: %w", gvr.GroupResource(), err)
		}
		for _, o := range page.Items {
			for version, manager := range writtenThrough(o.ObjectMeta) {
				gv, err := schema.ParseGroupVersion(version)
				if err != nil {
					continue
				}
				in, ok := removed[gv.WithKind(kind)]
				if !ok {
					continue
				}
				out = append(out, StoredObject{
					API:       RemovedAPI{Group: gv.Group, Version: gv.Version, Resource: gvr.Resource, RemovedIn: in},
					Namespace: o.Namespace, Name: o.Name, Manager: manager,
				})
			}
		}
		if page.Continue == "" {
			return out, nil
		}
		opts.Continue = page.Continue
	}
}

// writtenThrough maps each API version an object was written through to
// a manager that used it: its managed fields' versions, and the version
// its last-applied-configuration (kubectl apply) names.
func writtenThrough(m metav1.ObjectMeta) map[string]string {
	out := map[string]string{}
	for _, f := range m.ManagedFields {
		if f.APIVersion != "" {
			if _, ok := out[f.APIVersion]; !ok {
				out[f.APIVersion] = f.Manager
			}
		}
	}
	if applied := m.Annotations[corev1.LastAppliedConfigAnnotation]; applied != "" {
		var tm metav1.TypeMeta
		if json.Unmarshal([]byte(applied), &tm) == nil && tm.APIVersion != "" {
			out[tm.APIVersion] = "kubectl apply"
		}
	}
	return out
}
