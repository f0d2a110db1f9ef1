package certinstall

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"sigs.k8s.io/yaml"

	corev1 "k8s.io/api/core/v1"

	"github.com/kiln-project/kiln/ignition/certbundle"
	"github.com/kiln-project/kiln/ignition/nodelayout"
)

const schedulerPod = `apiVersion: v1
kind: Pod
metadata:
  name: kube-scheduler
  namespace: kube-system
spec:
  containers:
  - name: kube-scheduler
    # a comment the edit keeps
    image: registry.kiln.dev/kube-scheduler:v1.36.3
`

func TestAnnotateKeepsTheManifestAndIsIdempotent(t *testing.T) {
	p := filepath.Join(t.TempDir(), "kube-scheduler.yaml")
	if err := os.WriteFile(p, []byte(schedulerPod), 0o644); err != nil {
		t.Fatal(err)
	}
	for i, tc := range []struct {
		run     string
		changed bool
	}{{"20261204T213000Z", true}, {"20261204T213000Z", false}, {"20261205T080000Z", true}} {
		changed, err := Annotate(p, tc.run)
		if err != nil || changed != tc.changed {
			t.Fatalf("step %d: Annotate(%s) = %v, %v; want %v", i, tc.run, changed, err, tc.changed)
		}
		data, _ := os.ReadFile(p)
		var pod corev1.Pod
		if err := yaml.UnmarshalStrict(data, &pod); err != nil {
			t.Fatal(err)
		}
		if pod.Annotations[Annotation] != tc.run || len(pod.Annotations) != 1 || pod.Name != "kube-scheduler" {
			t.Errorf("step %d: annotations %v, name %q", i, pod.Annotations, pod.Name)
		}
		if !strings.Contains(string(data), "# a comment the edit keeps") {
			t.Errorf("step %d: the comment is gone:\n%s", i, data)
		}
	}
}

func TestStartTimeFromProc(t *testing.T) {
	proc := t.TempDir()
	write := func(name, data string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(proc, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(proc, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("stat", "cpu  1 2 3\nbtime 1700000000\nprocesses 5\n")
	// Field 22 is the start time in ticks: 100 ticks a second.
	stat := func(pid, ticks string) string {
		return pid + " (kube-apiserver) S 1 1 1 0 -1 4194560 1 0 0 0 1 1 0 0 20 0 10 0 " + ticks + " 1 1\n"
	}
	write("100/cmdline", "/usr/local/bin/kube-apiserver\x00--advertise-address=10.0.0.1\x00")
	write("100/stat", stat("100", "5000"))
	write("200/cmdline", "kube-apiserver\x00")
	write("200/stat", stat("200", "12345"))
	write("300/cmdline", "/usr/local/bin/kube-scheduler\x00")
	write("300/stat", stat("300", "99999"))
	write("self/cmdline", "kube-apiserver\x00")
	got, ok, err := Started(proc, "kube-apiserver")
	if err != nil || !ok {
		t.Fatalf("Started = %v, %v", ok, err)
	}
	if want := time.Unix(1700000000, 0).Add(123450 * time.Millisecond); !got.Equal(want) {
		t.Errorf("Started = %s, want the newest process's %s", got, want)
	}
	if _, ok, err := Started(proc, "etcd"); ok || err != nil {
		t.Errorf("Started(etcd) = %v, %v; want none", ok, err)
	}
}

// Do writes what differs, restarts the active static pods once per run,
// and waits until each runs a process started since and the API server is
// ready; a second run of the same bundle writes and restarts nothing.
func TestDo(t *testing.T) {
	root := t.TempDir()
	kube := nodelayout.KubernetesDir
	for _, d := range []string{nodelayout.KilnConfigDir, nodelayout.PKIDir, filepath.Join(kube, nodelayout.StaticPodsSubdir)} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	manifests := filepath.Join(root, kube, nodelayout.StaticPodsSubdir)
	for _, c := range []string{"kube-apiserver", "kube-scheduler"} { // no controller manager: not active here
		if err := os.WriteFile(filepath.Join(manifests, c+".yaml"), []byte(strings.ReplaceAll(schedulerPod, "kube-scheduler", c)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, nodelayout.PKIDir, "apiserver-etcd-client.crt"), []byte("same"), 0o644); err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_800_000_000, 0)
	started := map[string]time.Time{"kube-apiserver": now.Add(-time.Hour), "kube-scheduler": now.Add(-time.Hour)}
	polls := 0
	var readyWith []byte
	in := &Install{
		Root: root, KubeDir: kube, Now: func() time.Time { return now }, Poll: time.Millisecond, Log: logrus.New(),
		Started: func(b string) (time.Time, bool, error) {
			polls++
			if polls > 3 { // the kubelet restarts them after a while
				started[b] = now.Add(time.Second)
			}
			t, ok := started[b]
			return t, ok, nil
		},
		Ready: func(_ context.Context, cert []byte) error { readyWith = cert; return nil },
	}
	b := certbundle.Bundle{Run: "20261204T213000Z", Files: []certbundle.File{
		{Path: nodelayout.PKIDir + "/apiserver.crt", Mode: 0o644, Data: []byte("new serving")},
		{Path: nodelayout.PKIDir + "/apiserver.key", Mode: 0o600, Data: []byte("new key")},
		{Path: nodelayout.PKIDir + "/apiserver-etcd-client.crt", Mode: 0o644, Data: []byte("same")},
	}}
	if err := in.Do(t.Context(), b); err != nil {
		t.Fatal(err)
	}
	if string(readyWith) != "new serving" {
		t.Errorf("Ready was asked for %q", readyWith)
	}
	st, err := os.Stat(filepath.Join(root, nodelayout.PKIDir, "apiserver.key"))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("apiserver.key: %v, %v", st, err)
	}
	for _, c := range []string{"kube-apiserver", "kube-scheduler"} {
		data, _ := os.ReadFile(filepath.Join(manifests, c+".yaml"))
		if !strings.Contains(string(data), Annotation+`: "20261204T213000Z"`) {
			t.Errorf("%s not annotated:\n%s", c, data)
		}
	}
	if _, err := os.Stat(filepath.Join(manifests, "kube-controller-manager.yaml")); err == nil {
		t.Error("a manifest that was not there was written")
	}

	// Again: nothing restarts, so it does not wait for a restart.
	started = map[string]time.Time{"kube-apiserver": now.Add(-time.Hour), "kube-scheduler": now.Add(-time.Hour)}
	polls = -1000
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	if err := in.Do(ctx, b); err != nil {
		t.Fatalf("second run: %v", err)
	}

	// A run that never sees the restart names what it waits for.
	b.Run = "20261205T000000Z"
	ctx2, cancel2 := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel2()
	if err := in.Do(ctx2, b); err == nil || !strings.Contains(err.Error(), "has not restarted yet") {
		t.Errorf("Do without a restart = %v; want what it waited for", err)
	}
}

// With a Lock, Do holds it from the first file written until the API
// server is ready again; a lock it cannot take writes nothing.
func TestDoHoldsTheLock(t *testing.T) {
	root, kube, _ := apiServerMaster(t)
	now := time.Unix(1_800_000_000, 0)
	var events []string
	held := false
	in := &Install{
		Root: root, KubeDir: kube, Now: func() time.Time { return now }, Poll: time.Millisecond, Log: logrus.New(),
		Started: func(string) (time.Time, bool, error) { return now.Add(time.Second), true, nil },
		Ready: func(context.Context, []byte) error {
			if !held {
				t.Error("the API server was waited for without the lock")
			}
			events = append(events, "ready")
			return nil
		},
		Lock: func(context.Context) (func(), error) {
			held = true
			events = append(events, "lock")
			return func() { held = false; events = append(events, "unlock") }, nil
		},
		Settle: time.Millisecond,
	}
	b := certbundle.Bundle{Run: "auto-20261205T000000Z", Files: []certbundle.File{{Path: nodelayout.PKIDir + "/apiserver.crt", Mode: 0o644, Data: []byte("new")}}}
	if err := in.Do(t.Context(), b); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(events, ","); got != "lock,ready,unlock" {
		t.Errorf("events %s", got)
	}
	in.Lock = func(context.Context) (func(), error) { return nil, context.DeadlineExceeded }
	b.Run, b.Files[0].Data = "auto-20261206T000000Z", []byte("newer")
	if err := in.Do(t.Context(), b); err == nil {
		t.Error("Do without its lock succeeded")
	}
	if data, _ := os.ReadFile(filepath.Join(root, nodelayout.PKIDir, "apiserver.crt")); string(data) != "new" {
		t.Errorf("apiserver.crt = %q without the lock", data)
	}
}

// A bundle of etcd member certificates only restarts nothing: etcd reads
// them at every handshake.
func TestDoEtcdMemberOnlyRestartsNothing(t *testing.T) {
	root, kube, manifest := apiServerMaster(t)
	pod, _ := os.ReadFile(manifest)
	in := &Install{
		Root: root, KubeDir: kube, Now: time.Now, Poll: time.Millisecond, Log: logrus.New(),
		Started: func(string) (time.Time, bool, error) { t.Error("waited for a restart"); return time.Time{}, false, nil },
		Ready:   func(context.Context, []byte) error { t.Error("waited for the API server"); return nil },
	}
	b := certbundle.Bundle{Run: "auto-20261205T000000Z", Files: []certbundle.File{{Path: nodelayout.EtcdPKIDir + "/peer.crt", Mode: 0o644, Data: []byte("new")}}}
	if err := in.Do(t.Context(), b); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(manifest); string(data) != string(pod) {
		t.Errorf("kube-apiserver.yaml was annotated:\n%s", data)
	}
	if data, _ := os.ReadFile(filepath.Join(root, nodelayout.EtcdPKIDir, "peer.crt")); string(data) != "new" {
		t.Errorf("peer.crt = %q", data)
	}
}

// apiServerMaster returns the root of a master's files with kiln's and
// the PKI directories and an active kube-apiserver static pod, its
// /etc/kubernetes and the manifest's path.
func apiServerMaster(t *testing.T) (root, kube, manifest string) {
	t.Helper()
	root, kube = t.TempDir(), nodelayout.KubernetesDir
	for _, d := range []string{nodelayout.KilnConfigDir, nodelayout.PKIDir, nodelayout.EtcdPKIDir, filepath.Join(kube, nodelayout.StaticPodsSubdir)} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	manifest = filepath.Join(root, kube, nodelayout.StaticPodsSubdir, "kube-apiserver.yaml")
	if err := os.WriteFile(manifest, []byte(strings.ReplaceAll(schedulerPod, "kube-scheduler", "kube-apiserver")), 0o644); err != nil {
		t.Fatal(err)
	}
	return root, kube, manifest
}
