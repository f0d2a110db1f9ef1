package provision

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/kiln-project/kiln/platforms"
	"github.com/kiln-project/kiln/platforms/local/machine"
)

// fakeMachines answers State from states and Exec from outputs keyed by
// "<machine>: <argv joined>", recording every Exec.
type fakeMachines struct {
	states  map[string]machine.State
	outputs map[string]string
	errs    map[string]error
	calls   []string
}

func (f *fakeMachines) State(_ context.Context, name string) (machine.State, error) {
	if st, ok := f.states[name]; ok {
		return st, nil
	}
	return machine.StateAbsent, nil
}

func (f *fakeMachines) Exec(_ context.Context, name string, argv ...string) ([]byte, error) {
	key := name + ": " + strings.Join(argv, " ")
	f.calls = append(f.calls, key)
	return []byte(f.outputs[key]), f.errs[key]
}

func TestFailedUnits(t *testing.T) {
	const list = "systemctl --failed --no-legend --plain"
	f := &fakeMachines{
		states: map[string]machine.State{
			"demo-bootstrap": machine.StateRunning,
			"demo-master-0":  machine.StateRunning,
			"demo-master-1":  machine.StateStopped,
			"demo-worker-0":  machine.StateRunning,
		},
		outputs: map[string]string{
			"demo-bootstrap: " + list: "",
			"demo-master-0: " + list: "kubelet.service loaded failed failed kubelet: The Kubernetes Node Agent\n" +
				"● kiln-etcd.service loaded failed failed etcd member\n",
			"demo-master-0: journalctl -u kubelet.service -n 1 --no-pager -o cat":   "\nE1123 run.go:72] failed to load kubelet config\n\n",
			"demo-master-0: journalctl -u kiln-etcd.service -n 1 --no-pager -o cat": "",
		},
		errs: map[string]error{"demo-worker-0: " + list: errors.New("no system bus yet")},
	}
	got := failedUnits(context.Background(), f, []string{"demo-bootstrap", "demo-master-0", "demo-master-1", "demo-worker-0"})
	want := []platforms.FailedUnit{
		{Machine: "demo-master-0", Unit: "kubelet.service", LastLine: "E1123 run.go:72] failed to load kubelet config"},
		{Machine: "demo-master-0", Unit: "kiln-etcd.service", LastLine: ""},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("failedUnits = %+v, want %+v", got, want)
	}
	wantCalls := []string{
		"demo-bootstrap: " + list,
		"demo-master-0: " + list,
		"demo-master-0: journalctl -u kubelet.service -n 1 --no-pager -o cat",
		"demo-master-0: journalctl -u kiln-etcd.service -n 1 --no-pager -o cat",
		"demo-worker-0: " + list, // the stopped master is not asked
	}
	if !reflect.DeepEqual(f.calls, wantCalls) {
		t.Errorf("exec calls = %q, want %q", f.calls, wantCalls)
	}
}
