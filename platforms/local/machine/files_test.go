package machine

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// runningMachine records machine name as running (its nspawn process is
// the test's own) with a root directory on the host, and returns the root.
func runningMachine(t *testing.T, m *Manager, name string) string {
	t.Helper()
	self, ok := readProc(os.Getpid())
	if !ok {
		t.Fatal("cannot read own stat")
	}
	root := filepath.Join(m.dir(name), "root")
	if err := os.MkdirAll(filepath.Join(root, "etc", "kubernetes", "manifests"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := m.writeRecord(&record{Name: name, PID: os.Getpid(), StartTime: self.StartTime, Mode: CgroupV1, Started: time.Unix(0, 0).UTC()}); err != nil {
		t.Fatal(err)
	}
	return root
}

func TestReadAndWriteAFileOfAMachine(t *testing.T) {
	m, _ := newTestManager(t)
	root := runningMachine(t, m, "demo-master-0")
	ctx := context.Background()
	const manifest = "/etc/kubernetes/manifests/kube-apiserver.yaml"
	if err := m.WriteFile(ctx, "demo-master-0", manifest, 0o600, func(w io.Writer) error {
		_, err := io.WriteString(w, "image: kiln.local/kube-apiserver:v1.36.3\n")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(filepath.Join(root, manifest))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("written file: %v, %v", st, err)
	}
	got, err := m.ReadFile(ctx, "demo-master-0", manifest)
	if err != nil || string(got) != "image: kiln.local/kube-apiserver:v1.36.3\n" {
		t.Errorf("read back %q, %v", got, err)
	}
}

func TestFilesOfAMachineFollowNoLink(t *testing.T) {
	m, _ := newTestManager(t)
	root := runningMachine(t, m, "demo-master-0")
	outside := t.TempDir()
	secret := filepath.Join(outside, "shadow")
	if err := os.WriteFile(secret, []byte("host secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	// What runs in the machine made its manifests directory a link to a
	// host directory, and a manifest a link to a host file.
	dir := filepath.Join(root, "etc", "kubernetes", "manifests")
	if err := os.Symlink(secret, filepath.Join(dir, "etcd.yaml")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(dir, dir+".real"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, dir); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if got, err := m.ReadFile(ctx, "demo-master-0", "/etc/kubernetes/manifests/shadow"); err == nil {
		t.Errorf("read %q through a link", got)
	}
	err := m.WriteFile(ctx, "demo-master-0", "/etc/kubernetes/manifests/kube-apiserver.yaml", 0o600, func(w io.Writer) error {
		_, err := io.WriteString(w, "x")
		return err
	})
	if err == nil {
		t.Error("wrote through a link")
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 1 {
		t.Errorf("the host directory holds %d files, want its 1", len(ents))
	}
	if _, err := m.ReadFile(ctx, "demo-master-0", "../../etc/passwd"); err == nil || !strings.Contains(err.Error(), "clean absolute path") {
		t.Errorf("a relative path: %v", err)
	}
}

func TestFilesOfAnAbsentMachine(t *testing.T) {
	m, _ := newTestManager(t)
	if _, err := m.ReadFile(context.Background(), "demo-worker-0", "/etc/hostname"); err == nil || !strings.Contains(err.Error(), "absent") {
		t.Errorf("absent machine: %v", err)
	}
}
