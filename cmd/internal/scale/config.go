package scale

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kiln-project/kiln/assets/installconfig/types"
)

// redacted is the pull secret as `kiln show install-config` prints it: a
// file made from that output keeps the cluster's pull secret.
const redacted = "REDACTED"

// Counts returns the replica counts of want, an edited copy of the
// cluster's install-config cur, after checking that nothing but
// controlPlane.replicas and compute[].replicas changed: any other change
// is refused, each changed field named (kiln cannot apply it to a running
// cluster).
func Counts(cur, want *types.Config) (masters, workers int, err error) {
	a, b := *cur, *want
	if b.PullSecret == redacted {
		b.PullSecret = a.PullSecret
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
	for _, path := range diff(toTree(&a), toTree(&b), "") {
		errs = append(errs, field.Forbidden(field.NewPath(path), "only controlPlane.replicas and compute[].replicas can change on a running cluster"))
	}
	if len(errs) > 0 {
		return 0, 0, errs.ToAggregate()
	}
	return want.MasterReplicas(), want.WorkerReplicas(), nil
}

// toTree is c as generic JSON values.
func toTree(c *types.Config) any {
	data, _ := json.Marshal(c)
	var v any
	_ = json.Unmarshal(data, &v)
	return v
}

// diff returns the paths where a and b differ, sorted.
func diff(a, b any, path string) []string {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if aok && bok {
		var out []string
		keys := map[string]bool{}
		for k := range am {
			keys[k] = true
		}
		for k := range bm {
			keys[k] = true
		}
		for k := range keys {
			p := k
			if path != "" {
				p = path + "." + k
			}
			out = append(out, diff(am[k], bm[k], p)...)
		}
		sort.Strings(out)
		return out
	}
	al, aok := a.([]any)
	bl, bok := b.([]any)
	if aok && bok && len(al) == len(bl) {
		var out []string
		for i := range al {
			out = append(out, diff(al[i], bl[i], fmt.Sprintf("%s[%d]", path, i))...)
		}
		return out
	}
	if reflect.DeepEqual(a, b) {
		return nil
	}
	return []string{path}
}
