package nodeimage

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeImageRoot writes a small image root: kiln's binaries, helpers and
// images, two Debian packages' lists, the image's units and configs, and
// what the payload must leave out.
func fakeImageRoot(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	files := map[string]string{
		"usr/local/bin/kubelet":                        "kubelet",
		"usr/local/bin/containerd":                     "containerd",
		"usr/local/bin/containerd-shim-runc-v2":        "shim",
		"usr/local/bin/ctr":                            "ctr",
		"usr/local/bin/etcdutl":                        "etcdutl",
		"usr/local/bin/kubectl":                        "kubectl",
		"usr/local/bin/runc":                           "runc",
		"usr/local/bin/kube-apiserver":                 "runs from its image",
		"usr/local/libexec/kiln/import-images":         "#!/bin/sh",
		"usr/local/libexec/kiln/no-selinux/setfiles":   "#!/bin/sh\nexit 0",
		"opt/kiln/images/pause.tar":                    "tar",
		"opt/kiln/images/images.txt":                   "pause",
		"usr/lib/dracut/modules.d/30ignition/ignition": "ignition",
		"usr/bin/ignition-validate":                    "validate",
		"usr/share/doc/ignition/copyright":             "doc",
		"usr/lib/cni/bridge":                           "bridge",
		"usr/bin/bash":                                 "not the payload's",
		"etc/systemd/system/containerd.service":        "[Service]",
		"etc/systemd/system/kiln-ignition.service":     "[Service]",
		"etc/systemd/system/kiln-images.service":       "[Service]",
		"etc/systemd/system/kiln-cgroup-rw.service":    "[Service]",
		"etc/systemd/journald.conf.d/kiln.conf":        "[Journal]",
		"etc/containerd/config.toml":                   "version = 3",
		"var/lib/dpkg/info/ignition.list": "/.\n/usr\n/usr/bin\n/usr/bin/ignition-validate\n/usr/lib/dracut/modules.d/30ignition\n" +
			"/usr/lib/dracut/modules.d/30ignition/ignition\n/usr/share/doc/ignition/copyright\n",
		"var/lib/dpkg/info/containernetworking-plugins.list": "/.\n/lib/cni\n/lib/cni/bridge\n/lib/cni/host-local\n",
	}
	for p, data := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(data), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// A link, as Debian's merged /usr and some packages have.
	if err := os.Symlink("bridge", filepath.Join(root, "usr/lib/cni/host-local")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("usr/lib", filepath.Join(root, "lib")); err != nil {
		t.Fatal(err)
	}
	return root
}

// TestWriteSysext: the payload holds kiln's binaries, helpers and images
// (under /usr/share, with an import script that reads them there, and
// nothing under /opt),
// the two packages' files but their docs, the units under /usr/lib and
// containerd's config under /usr/share with a drop-in that reads it, and
// the extension-release file; the host's /etc and shell are not in it.
func TestWriteSysext(t *testing.T) {
	img := &Image{RootFS: fakeImageRoot(t)}
	img.Release.Kubernetes = "v1.36.3"
	kiln := filepath.Join(t.TempDir(), "kiln")
	if err := os.WriteFile(kiln, []byte("kiln"), 0o755); err != nil {
		t.Fatal(err)
	}
	dest := filepath.Join(t.TempDir(), SysextName("v1.36.3"))
	if err := img.WriteSysext(dest, kiln); err != nil {
		t.Fatal(err)
	}
	var got []string
	err := filepath.WalkDir(dest, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dest, p)
		if d.Type()&fs.ModeSymlink != 0 {
			target, _ := os.Readlink(p)
			rel += " -> " + target
		}
		got = append(got, rel)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"usr/bin/ignition-validate",
		"usr/lib/cni/bridge",
		"usr/lib/cni/host-local -> bridge",
		"usr/lib/dracut/modules.d/30ignition/ignition",
		"usr/lib/extension-release.d/extension-release.kiln-v1.36.3",
		"usr/lib/systemd/system/containerd.service",
		"usr/lib/systemd/system/containerd.service.d/10-kiln-payload.conf",
		"usr/lib/systemd/system/kiln-cgroup-rw.service",
		"usr/lib/systemd/system/kiln-ignition.service",
		"usr/lib/systemd/system/kiln-images.service",
		"usr/local/bin/containerd",
		"usr/local/bin/containerd-shim-runc-v2",
		"usr/local/bin/ctr",
		"usr/local/bin/etcdutl",
		"usr/local/bin/kiln",
		"usr/local/bin/kubectl",
		"usr/local/bin/kubelet",
		"usr/local/bin/runc",
		"usr/local/libexec/kiln/import-images",
		"usr/local/libexec/kiln/no-selinux/setfiles",
		"usr/share/kiln/containerd/config.toml",
		"usr/share/kiln/images/images.txt",
		"usr/share/kiln/images/pause.tar",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("payload:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	release, _ := os.ReadFile(filepath.Join(dest, "usr/lib/extension-release.d/extension-release.kiln-v1.36.3"))
	if string(release) != "ID=debian\nVERSION_ID=12\n" {
		t.Errorf("extension-release: %q", release)
	}
	script, _ := os.ReadFile(filepath.Join(dest, "usr/local/libexec/kiln/import-images"))
	if !strings.Contains(string(script), "\ndir="+SysextImagesDir+"\n") || strings.Contains(string(script), "/opt") {
		t.Errorf("the payload's import script does not read %s:\n%s", SysextImagesDir, script)
	}
	dropIn, _ := os.ReadFile(filepath.Join(dest, "usr/lib/systemd/system/containerd.service.d/10-kiln-payload.conf"))
	if !strings.Contains(string(dropIn), "--config "+SysextContainerdConfig) {
		t.Errorf("containerd drop-in: %q", dropIn)
	}
	if st, err := os.Stat(filepath.Join(dest, "usr/lib/modules")); err != nil || !st.IsDir() {
		t.Errorf("the payload has no usr/lib/modules directory for kube-proxy's mount: %v, %v", st, err)
	}
	if st, err := os.Stat(filepath.Join(dest, "usr/local/bin/kubelet")); err != nil || st.Mode().Perm() != 0o755 {
		t.Errorf("kubelet: %v, %v", st, err)
	}
	if err := img.WriteSysext(dest, kiln); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Errorf("a second write over the payload: %v", err)
	}
}

// TestWriteSysextRefuses: a package or binary the image lacks, or a link
// that points outside /usr, fails, and leaves no payload behind.
func TestWriteSysextRefuses(t *testing.T) {
	for name, tt := range map[string]struct {
		change func(root string) error
		want   string
	}{
		"no ignition package": {func(root string) error { return os.Remove(filepath.Join(root, "var/lib/dpkg/info/ignition.list")) },
			"Debian package ignition is not in the image"},
		"no runc": {func(root string) error { return os.Remove(filepath.Join(root, "usr/local/bin/runc")) },
			"/usr/local/bin/runc"},
		"no kiln binary": {func(root string) error { return os.Remove(filepath.Join(root, "kiln")) },
			"the kiln binary"},
		"a link to /etc": {func(root string) error {
			return os.Symlink("/etc/shadow", filepath.Join(root, "usr/local/libexec/kiln/evil"))
		}, "links to /etc/shadow, outside the extension's /usr"},
		"a link to /opt, which the extension leaves to the host": {func(root string) error {
			return os.Symlink("/opt/kiln/images/pause.tar", filepath.Join(root, "usr/local/libexec/kiln/pause.tar"))
		}, "links to /opt/kiln/images/pause.tar, outside the extension's /usr"},
	} {
		t.Run(name, func(t *testing.T) {
			img := &Image{RootFS: fakeImageRoot(t)}
			kiln := filepath.Join(img.RootFS, "kiln")
			if err := os.WriteFile(kiln, []byte("kiln"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := tt.change(img.RootFS); err != nil {
				t.Fatal(err)
			}
			dest := filepath.Join(t.TempDir(), "kiln-x")
			if err := img.WriteSysext(dest, kiln); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want %q", err, tt.want)
			}
			if matches, _ := filepath.Glob(dest + "*"); len(matches) != 0 {
				t.Errorf("left %v", matches)
			}
		})
	}
}
