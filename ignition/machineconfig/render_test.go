package machineconfig

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

// mc is a MachineConfig of pool from YAML spec fields.
func mc(t *testing.T, name, pool, config, kubelet string) MachineConfig {
	t.Helper()
	m := MachineConfig{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{PoolLabel: pool}}}
	if config != "" {
		data, err := yaml.YAMLToJSON([]byte(config))
		if err != nil {
			t.Fatal(err)
		}
		m.Spec.Config = data
	}
	if kubelet != "" {
		data, err := yaml.YAMLToJSON([]byte(kubelet))
		if err != nil {
			t.Fatal(err)
		}
		m.Spec.KubeletConfig = data
	}
	return m
}

func file(path, data string) string {
	return "storage: {files: [{path: " + path + ", mode: 420, contents: {source: 'data:," + data + "'}}]}"
}

func TestRenderMergesInNameOrder(t *testing.T) {
	all := []MachineConfig{
		mc(t, "20-later", WorkerPool, file("/etc/a", "second"), "maxPods: 50"),
		mc(t, "10-first", WorkerPool, file("/etc/a", "first")+"\nsystemd: {units: [{name: x.service, enabled: true, contents: '[Service]'}]}", "maxPods: 20\nserializeImagePulls: false"),
		mc(t, "10-master", MasterPool, file("/etc/m", "m"), ""),
		{ObjectMeta: metav1.ObjectMeta{Name: "rendered-worker-old", Labels: map[string]string{RenderedForLabel: WorkerPool}}},
	}
	r, err := Render(WorkerPool, PoolSources(WorkerPool, all))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(r.Sources, ","); got != "10-first,20-later" {
		t.Errorf("sources %s, want 10-first,20-later", got)
	}
	if len(r.Config.Storage.Files) != 1 || *r.Config.Storage.Files[0].Contents.Source != "data:,second" {
		t.Errorf("files %+v: the later MachineConfig's /etc/a should win", r.Config.Storage.Files)
	}
	if len(r.Config.Systemd.Units) != 1 {
		t.Errorf("units %+v", r.Config.Systemd.Units)
	}
	var kc map[string]any
	if err := json.Unmarshal(r.KubeletConfig, &kc); err != nil {
		t.Fatal(err)
	}
	if kc["maxPods"] != float64(50) || kc["serializeImagePulls"] != false {
		t.Errorf("kubelet config %v: want maxPods 50 (later wins) and serializeImagePulls false (kept)", kc)
	}
	if !strings.HasPrefix(r.Name, "rendered-worker-") || len(r.Name) != len("rendered-worker-")+20 {
		t.Errorf("name %s", r.Name)
	}
	again, err := Render(WorkerPool, PoolSources(WorkerPool, []MachineConfig{all[1], all[0]}))
	if err != nil || again.Name != r.Name {
		t.Errorf("rendering the same sources again gave %v, %v; want %s", again, err, r.Name)
	}
	m, err := Render(MasterPool, PoolSources(MasterPool, all))
	if err != nil || len(m.Config.Storage.Files) != 1 || m.Config.Storage.Files[0].Path != "/etc/m" {
		t.Errorf("master pool: %+v, %v; want /etc/m only", m, err)
	}
	if m.Name == r.Name {
		t.Error("master and worker rendered to one name")
	}
}

func TestCustomPoolInheritsWorker(t *testing.T) {
	all := []MachineConfig{mc(t, "10-w", WorkerPool, file("/etc/w", "w"), ""), mc(t, "20-infra", "infra", file("/etc/i", "i"), "")}
	got := PoolSources("infra", all)
	if len(got) != 2 {
		t.Errorf("infra sources %v: want the worker's and its own", got)
	}
	if got := PoolSources(WorkerPool, all); len(got) != 1 {
		t.Errorf("worker sources %v: want its own only", got)
	}
}

func TestRenderRefusesWhatARunningNodeCannotApply(t *testing.T) {
	bad := []MachineConfig{
		mc(t, "a", WorkerPool, `
passwd: {users: [{name: bob}]}
kernelArguments: {shouldExist: [quiet]}
storage:
  links: [{path: /etc/l, target: /etc/x}]
  files:
  - {path: /var/lib/kiln/x, contents: {source: "data:,x"}}
  - {path: /etc/remote, contents: {source: "https://example.com/x"}}
  - {path: /etc/owned, user: {name: bob}}
systemd: {units: [{name: y.service, mask: true}]}`, ""),
		mc(t, "b", WorkerPool, "", "authentication: {anonymous: {enabled: true}}"),
		mc(t, "c", WorkerPool, "", "maxPodz: 3"),
		mc(t, "d", WorkerPool, "ignition: {version: 3.1.0}", ""),
	}
	_, err := Render(WorkerPool, bad)
	if err == nil {
		t.Fatal("rendered")
	}
	for _, want := range []string{
		"MachineConfig a: spec.config.passwd",
		"MachineConfig a: spec.config.kernelArguments",
		"MachineConfig a: spec.config.storage.links",
		"MachineConfig a: spec.config.storage.files[0].path",
		"MachineConfig a: spec.config.storage.files[1].contents.source",
		"MachineConfig a: spec.config.storage.files[2].user",
		"MachineConfig a: spec.config.systemd.units[0].mask",
		"MachineConfig b: spec.kubeletConfig.authentication",
		"MachineConfig c: spec.kubeletConfig: not a KubeletConfiguration",
		"MachineConfig d: spec.config.ignition.version",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	var fe *FieldError
	if !errors.As(err, &fe) {
		t.Errorf("%T is no *FieldError", err)
	}
}

// TestObjectRoundTrip stores a rendered config as the controller does
// and reads it back as the agent does, through unstructured objects.
func TestObjectRoundTrip(t *testing.T) {
	r, err := Render(WorkerPool, []MachineConfig{mc(t, "10-a", WorkerPool, file("/etc/a", "x"), "maxPods: 42")})
	if err != nil {
		t.Fatal(err)
	}
	obj, err := r.Object()
	if err != nil {
		t.Fatal(err)
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := unstructured.NestedMap(m, "spec", "config"); !ok {
		t.Fatalf("spec.config is not an object in %v", m["spec"])
	}
	var back MachineConfig
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &back); err != nil {
		t.Fatal(err)
	}
	r2, err := FromObject(back)
	if err != nil {
		t.Fatal(err)
	}
	if r2.Name != r.Name || r2.Pool != WorkerPool || len(r2.Config.Storage.Files) != 1 {
		t.Errorf("read back %+v", r2)
	}
	if h, _ := r2.hash(); r.Name != RenderedPrefix+WorkerPool+"-"+h {
		t.Errorf("content read back hashes to %s, name says %s", h, r.Name)
	}
	dropin, err := r2.KubeletDropin()
	if err != nil || !strings.Contains(string(dropin), `"kind": "KubeletConfiguration"`) || !strings.Contains(string(dropin), `"maxPods": 42`) {
		t.Errorf("drop-in %s, %v", dropin, err)
	}
}
