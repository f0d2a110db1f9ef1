package ignitionconfigs_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/coreos/ignition/v2/config/v3_3/types"
	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"

	"github.com/kiln-project/kiln/ignition/nodelayout"
)

// unitOf returns the contents of unit name in c; "" when c has none.
func unitOf(c types.Config, name string) string {
	for _, u := range c.Systemd.Units {
		if u.Name == name && u.Contents != nil {
			return *u.Contents
		}
	}
	return ""
}

// dropInOf returns the contents of the drop-in called dropIn of the unit
// called unit in c, "" when there is none.
func dropInOf(c types.Config, unit, dropIn string) string {
	for _, u := range c.Systemd.Units {
		for _, d := range u.Dropins {
			if u.Name == unit && d.Name == dropIn && d.Contents != nil {
				return *d.Contents
			}
		}
	}
	return ""
}

// directives returns the values of key in a unit, continuation lines
// joined.
func directives(unit, key string) []string {
	var vals []string
	for _, line := range strings.Split(strings.ReplaceAll(unit, "\\\n", " "), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), key+"="); ok {
			vals = append(vals, v)
		}
	}
	return vals
}

// denyFlags are the --deny-* arguments of argv.
func denyFlags(argv []string) []string {
	var out []string
	for _, a := range argv {
		if strings.HasPrefix(a, "--deny-") {
			out = append(out, a)
		}
	}
	return out
}

// The masters join before any pod can run, so the bootstrap machine runs
// the CSR approver itself: with its admin kubeconfig, the same deny list as
// the Deployment, restarted when it fails. Masters and workers do not.
func TestBootstrapRunsTheCSRApprover(t *testing.T) {
	boot := generatedBootstrap(t)
	unit := unitOf(boot, "kiln-csr-approver.service")
	if unit == "" {
		t.Fatal("the bootstrap machine has no kiln-csr-approver.service")
	}
	exec := directives(unit, "ExecStart")
	if len(exec) != 1 {
		t.Fatalf("ExecStart = %q, want one", exec)
	}
	argv := strings.Fields(exec[0])
	kubeconfig := nodelayout.KubeconfigDir + "/admin.kubeconfig"
	if len(argv) < 4 || strings.Join(argv[:3], " ") != nodelayout.KilnBinary+" node csr-approver" || argv[3] != "--kubeconfig="+kubeconfig {
		t.Errorf("ExecStart = %q, want %s node csr-approver --kubeconfig=%s ...", argv, nodelayout.KilnBinary, kubeconfig)
	}
	fileOf(t, boot, kubeconfig) // the bootstrap machine has it

	var dep appsv1.Deployment
	docs := strings.Split(string(fileOf(t, boot, "/opt/kiln/manifests/12-csr-approver.yaml")), "\n---\n")
	for _, d := range docs {
		var o appsv1.Deployment
		if err := yaml.Unmarshal([]byte(d), &o); err != nil {
			t.Fatal(err)
		}
		if o.Kind == "Deployment" {
			dep = o
		}
	}
	if len(dep.Spec.Template.Spec.Containers) == 0 {
		t.Fatal("12-csr-approver.yaml has no Deployment")
	}
	want := denyFlags(dep.Spec.Template.Spec.Containers[0].Command)
	if got := denyFlags(argv); len(want) < 5 || !slices.Equal(got, want) {
		t.Errorf("the bootstrap approver's deny flags %q, the Deployment's %q: want the same, at least the API's names, the cluster domain and both networks", got, want)
	}
	if r := directives(unit, "Restart"); !slices.Equal(r, []string{"on-failure"}) {
		t.Errorf("Restart = %q, want on-failure", r)
	}
	if w := directives(unit, "WantedBy"); !slices.Equal(w, []string{"multi-user.target"}) {
		t.Errorf("WantedBy = %q, want multi-user.target: it must start at boot, before the masters join", w)
	}
	for _, key := range []string{"After", "Requires", "BindsTo", "ConditionPathExists"} {
		if d := directives(unit, key); len(d) > 0 {
			t.Errorf("%s=%q: the approver waits for the API and the inventory itself, and must not wait for a unit", key, d)
		}
	}
	for name, c := range map[string]types.Config{"master": served(t, boot, "master"), "worker": served(t, boot, "worker")} {
		if unitOf(c, "kiln-csr-approver.service") != "" {
			t.Errorf("the %s config runs the approver with a unit: it runs as a Deployment there", name)
		}
	}
}
