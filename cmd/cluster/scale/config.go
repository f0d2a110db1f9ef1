package scale

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kiln-project/kiln/assets/installconfig/types"
)

// redacted is the pull secret as `kiln show install-config` prints it: a
// file made from that output keeps the cluster's pull secret.
const redacted = "REDACTED"

// Counts returns the replica counts of want, an edited copy of the
// cluster's install-config cur, after checking that nothing but
// controlPlane.replicas and compute[].replicas changed (and, on the ssh
// platform, platform.ssh.hosts, which HostsChange checks): any other
// change is refused, each changed field named (kiln cannot apply it to a
// running cluster).
func Counts(cur, want *types.Config) (masters, workers int, err error) {
	if errs := changes(cur, want); len(errs) > 0 {
		return 0, 0, errs.ToAggregate()
	}
	return want.MasterReplicas(), want.WorkerReplicas(), nil
}

// changes returns the fields of want, an edited copy of cur, that a scale
// cannot apply, as Counts explains.
func changes(cur, want *types.Config) field.ErrorList {
	a, b := *cur, *want
	if b.PullSecret == redacted {
		b.PullSecret = a.PullSecret
	}
	if a.Platform.SSH != nil && b.Platform.SSH != nil {
		s := *b.Platform.SSH
		s.Hosts = a.Platform.SSH.Hosts
		b.Platform.SSH = &s
	}
	if b.ControlPlane != nil && a.ControlPlane != nil {
		cp := *b.ControlPlane
		cp.Replicas = a.ControlPlane.Replicas
		b.ControlPlane = &cp
	}
	b.Compute = append([]types.MachinePool(nil), b.Compute...)
	for i := range b.Compute {
		if i < len(a.Compute) {
			b.Compute[i].Replicas = a.Compute[i].Replicas
		}
	}
	var errs field.ErrorList
	for _, path := range changedFields(&a, &b) {
		errs = append(errs, field.Forbidden(path, "only controlPlane.replicas, compute[].replicas and platform.ssh.hosts can change on a running cluster"))
	}
	return append(errs, HostsChange(cur, want)...)
}

// changedFields returns the paths of the fields where a and b (two values
// of one type, such as *types.Config) differ, named as their YAML names
// them, sorted. It sees what YAML sees: an empty list is the same as none,
// and a field that is not serialized (unexported, or tagged json:"-") is
// not compared.
func changedFields(a, b any) []*field.Path {
	r := &pathReporter{seen: map[string]bool{}}
	cmp.Equal(a, b, cmpopts.EquateEmpty(), cmp.FilterPath(notSerialized, cmp.Ignore()), cmp.Reporter(r))
	slices.SortFunc(r.changed, func(x, y *field.Path) int { return strings.Compare(x.String(), y.String()) })
	return r.changed
}

// notSerialized reports whether the last step of p is a struct field that
// encoding/json leaves out.
func notSerialized(p cmp.Path) bool {
	sf, ok := p.Last().(cmp.StructField)
	if !ok {
		return false
	}
	_, skip := jsonName(p.Index(-2).Type(), sf)
	return skip
}

// pathReporter is a cmp.Reporter collecting the field path of every
// difference, each once (a list item both removed and inserted is one
// path).
type pathReporter struct {
	steps   cmp.Path
	seen    map[string]bool
	changed []*field.Path
}

func (r *pathReporter) PushStep(s cmp.PathStep) { r.steps = append(r.steps, s) }

func (r *pathReporter) PopStep() { r.steps = r.steps[:len(r.steps)-1] }

func (r *pathReporter) Report(res cmp.Result) {
	if res.Equal() {
		return
	}
	p := fieldPath(r.steps)
	if !r.seen[p.String()] {
		r.seen[p.String()] = true
		r.changed = append(r.changed, p)
	}
}

// fieldPath turns a cmp path into install-config's terms: struct fields
// by their JSON names, list items by index, map entries by key.
func fieldPath(steps cmp.Path) *field.Path {
	var p *field.Path
	for i, s := range steps {
		switch s := s.(type) {
		case cmp.StructField:
			name, _ := jsonName(steps[i-1].Type(), s)
			p = p.Child(name)
		case cmp.SliceIndex:
			x, y := s.SplitKeys()
			p = p.Index(max(x, y)) // -1 on the side it is missing from
		case cmp.MapIndex:
			p = p.Key(fmt.Sprint(s.Key()))
		}
	}
	return p
}

// jsonName is the name encoding/json gives field f of struct type parent,
// and whether it leaves the field out.
func jsonName(parent reflect.Type, f cmp.StructField) (name string, skip bool) {
	sf := parent.Field(f.Index())
	name, _, _ = strings.Cut(sf.Tag.Get("json"), ",")
	switch {
	case !sf.IsExported() || name == "-":
		return sf.Name, true
	case name == "":
		return sf.Name, false
	}
	return name, false
}
