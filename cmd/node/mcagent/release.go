package mcagent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"syscall"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/kiln-project/kiln/assets/release"
	"github.com/kiln-project/kiln/graph/atomicfile"
	"github.com/kiln-project/kiln/ignition/machineconfig"
	"github.com/kiln-project/kiln/ignition/nodelayout"
)

// A node's release is what its components run: the control plane's static
// pods name their images in their manifests, the kubelet is a binary. The
// agent brings each component its Node's DesiredReleaseAnnotation names
// to that release, in machineconfig.ReleaseOrder, from the payload of the
// release that kiln upgrade cluster staged on the node
// (nodelayout.ReleasesDir/<version>, or the merged extension itself on a
// host that runs the payload as a system extension). What it checks is
// what runs, never a record, so a pass cut short is finished by the next.

// syncRelease brings every component of want to its release; progress is
// told what it starts. It returns whether anything changed.
func (a *applier) syncRelease(ctx context.Context, want machineconfig.NodeRelease, progress func(string) error) (bool, error) {
	changed := false
	for _, c := range machineconfig.ReleaseOrder {
		v, ok := want[c]
		if !ok {
			continue
		}
		r, err := release.Lookup(v)
		if err != nil {
			return changed, err
		}
		ok, err = a.runs(ctx, c, r)
		if err != nil {
			return changed, fmt.Errorf("%s: %w", c, err)
		}
		if ok {
			continue
		}
		if err := progress(fmt.Sprintf("bringing %s to %s", c, v)); err != nil {
			return changed, err
		}
		if err := a.bring(ctx, c, r); err != nil {
			return changed, fmt.Errorf("bringing %s to %s: %w", c, v, err)
		}
		changed = true
	}
	return changed, nil
}

// runs reports whether c runs r on this node.
func (a *applier) runs(ctx context.Context, c string, r release.Release) (bool, error) {
	if c == machineconfig.Kubelet {
		v, err := a.kubeletVersion(ctx)
		return v == r.Kubernetes, err
	}
	files, err := a.manifests(c)
	if err != nil {
		return false, err
	}
	want := r.Image(release.Component(c))
	for _, f := range files {
		data, err := atomicfile.ReadFile(a.p.Root, a.full(f))
		if err != nil {
			return false, err
		}
		img, err := manifestImage(data, c)
		if err != nil {
			return false, fmt.Errorf("%s: %w", f, err)
		}
		if img != want {
			return false, nil
		}
	}
	return true, nil
}

// manifests are the static pod manifests of c on this node: the active
// one and the staged one (a master whose etcd member does not vote yet),
// those that exist. None is an error: only a master runs c.
func (a *applier) manifests(c string) ([]string, error) {
	var out []string
	for _, dir := range []string{nodelayout.StaticPodDir, nodelayout.StagedPodDir} {
		f := path.Join(dir, c+".yaml")
		if _, err := atomicfile.Stat(a.p.Root, a.full(f)); err == nil {
			out = append(out, f)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no static pod manifest of %s on this node (%s)", c, nodelayout.StaticPodDir)
	}
	return out, nil
}

// manifestImage is the image of the container named c in a static pod
// manifest.
func manifestImage(data []byte, c string) (string, error) {
	var pod corev1.Pod
	if err := yaml.Unmarshal(data, &pod); err != nil {
		return "", err
	}
	for _, ct := range pod.Spec.Containers {
		if ct.Name == c {
			return ct.Image, nil
		}
	}
	if len(pod.Spec.Containers) > 0 {
		return pod.Spec.Containers[0].Image, nil
	}
	return "", errors.New("no container")
}

// kubeletBinary is the kubelet the node runs.
var kubeletBinary = path.Join(release.BinDir, "kubelet")

// kubeletVersion is the version of the kubelet binary on the node
// ("v1.36.3").
func (a *applier) kubeletVersion(ctx context.Context) (string, error) {
	out, err := a.run.Run(ctx, a.full(kubeletBinary), "--version")
	if err != nil {
		return "", fmt.Errorf("%s --version: %w", kubeletBinary, err)
	}
	f := strings.Fields(string(out))
	if len(f) != 2 || f[0] != "Kubernetes" {
		return "", fmt.Errorf("%s --version says %q", kubeletBinary, strings.TrimSpace(string(out)))
	}
	return f[1], nil
}

// bring puts c at r: a control-plane component gets its image imported
// and its manifests name it (the kubelet restarts the static pod); the
// kubelet gets every image of r (the add-ons' too, which the upgrade
// changes once every kubelet runs r) and r's binary, and restarts.
func (a *applier) bring(ctx context.Context, c string, r release.Release) error {
	payload, err := a.payload(r.Kubernetes)
	if err != nil {
		return err
	}
	if c != machineconfig.Kubelet {
		if err := a.importImage(ctx, path.Join(payload, nodelayout.PayloadImagesDir, c+".tar")); err != nil {
			return err
		}
		return a.retag(c, r.Image(release.Component(c)))
	}
	archives, err := os.ReadDir(a.full(path.Join(payload, nodelayout.PayloadImagesDir)))
	if err != nil {
		return fmt.Errorf("the images of %s: %w", r.Kubernetes, err)
	}
	for _, e := range archives {
		if e.Type().IsRegular() && strings.HasSuffix(e.Name(), ".tar") {
			if err := a.importImage(ctx, path.Join(payload, nodelayout.PayloadImagesDir, e.Name())); err != nil {
				return err
			}
		}
	}
	if err := a.installKubelet(ctx, payload, r.Kubernetes); err != nil {
		return err
	}
	if err := a.systemctl(ctx, "restart", "kubelet.service"); err != nil {
		return err
	}
	if a.kubeletUp != nil {
		if err := a.kubeletUp(ctx); err != nil {
			return fmt.Errorf("the kubelet after its restart: %w", err)
		}
	}
	return nil
}

// payload is the directory on the node holding the payload of release
// version: the one an upgrade staged, else the merged extension of that
// release. A payload is a directory owned by root, never a link.
func (a *applier) payload(version string) (string, error) {
	for _, dir := range []string{path.Join(nodelayout.ReleasesDir, version), path.Join(nodelayout.ExtensionsDir, nodelayout.PayloadExtension(version))} {
		st, err := os.Lstat(a.full(dir))
		if err == nil && st.IsDir() {
			return dir, nil
		}
	}
	return "", fmt.Errorf("the payload of %s is not on this node (%s/%s): kiln upgrade cluster stages it", version, nodelayout.ReleasesDir, version)
}

// importImage imports the image archive at file (on the node) into the
// container runtime, in the namespace the kubelet's images are in.
func (a *applier) importImage(ctx context.Context, file string) error {
	if _, err := a.run.Run(ctx, importArgv(a.full(file))...); err != nil {
		return fmt.Errorf("importing %s: %w", file, err)
	}
	return nil
}

// importArgv imports an image archive into containerd's k8s.io namespace.
func importArgv(file string) []string {
	return []string{"ctr", "--namespace", "k8s.io", "images", "import", file}
}

// retag points every manifest of c at image (and etcd's at kiln's
// --snapshot-count), atomically, following no link.
func (a *applier) retag(c, image string) error {
	files, err := a.manifests(c)
	if err != nil {
		return err
	}
	for _, f := range files {
		old, err := atomicfile.ReadFile(a.p.Root, a.full(f))
		if err != nil {
			return err
		}
		data, err := release.Retag(old, release.Component(c), image)
		if err == nil && c == string(release.Etcd) {
			// An earlier kiln's manifest snapshots too rarely for etcd
			// 3.6's restarts (release.EtcdSnapshotCount).
			data, err = release.WithEtcdSnapshotCount(data)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		if string(data) == string(old) {
			continue
		}
		if err := a.w.Write(a.full(f), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// installKubelet puts the kubelet of payload (release version) in place.
// On a host that merges kiln's payload as a system extension, the
// extension of version replaces the merged one, whose directory goes back
// among the staged releases (a rollback merges it again), and systemd-sysext
// refreshes the merge; elsewhere (kiln's node image) the binary is
// replaced.
func (a *applier) installKubelet(ctx context.Context, payload, version string) error {
	merged, err := a.extensions()
	if err != nil {
		return err
	}
	if len(merged) == 0 {
		src := a.full(path.Join(payload, nodelayout.PayloadKubelet))
		if st, err := os.Lstat(src); err != nil || !st.Mode().IsRegular() {
			return fmt.Errorf("the kubelet of %s (%s): not a regular file (%v)", version, src, err)
		}
		in, err := os.Open(src)
		if err != nil {
			return err
		}
		defer in.Close()
		return a.w.WriteFunc(a.full(kubeletBinary), 0o755, func(w io.Writer) error {
			_, err := io.Copy(w, in)
			return err
		})
	}
	want := nodelayout.PayloadExtension(version)
	if !slices.Contains(merged, want) {
		if err := a.moveTree(ctx, payload, path.Join(nodelayout.ExtensionsDir, want)); err != nil {
			return fmt.Errorf("merging the payload of %s: %w", version, err)
		}
	}
	for _, name := range merged {
		if name == want {
			continue
		}
		aside := path.Join(nodelayout.ReleasesDir, strings.TrimPrefix(name, nodelayout.PayloadExtension("")))
		if err := os.RemoveAll(a.full(aside)); err != nil {
			return err
		}
		if err := os.MkdirAll(a.full(nodelayout.ReleasesDir), 0o755); err != nil {
			return err
		}
		if err := a.moveTree(ctx, path.Join(nodelayout.ExtensionsDir, name), aside); err != nil {
			return fmt.Errorf("setting the payload %s aside: %w", name, err)
		}
	}
	if _, err := a.run.Run(ctx, "systemd-sysext", "refresh"); err != nil {
		return fmt.Errorf("systemd-sysext refresh: %w", err)
	}
	return nil
}

// moveTree moves the directory from to to (which must not exist): a
// rename, or where they are on two file systems (a host whose /var/lib/kiln
// is a mount of its own) a copy under a temporary name beside to, renamed
// into place, then the removal of from. A copy cut short is started again.
func (a *applier) moveTree(ctx context.Context, from, to string) error {
	err := os.Rename(a.full(from), a.full(to))
	if !errors.Is(err, syscall.EXDEV) {
		return err
	}
	tmp := nodelayout.PayloadCopy(to)
	if err := os.RemoveAll(a.full(tmp)); err != nil {
		return err
	}
	if _, err := a.run.Run(ctx, copyTreeArgv(a.full(from), a.full(tmp))...); err != nil {
		return fmt.Errorf("copying %s: %w", from, err)
	}
	if err := os.Rename(a.full(tmp), a.full(to)); err != nil {
		return err
	}
	return os.RemoveAll(a.full(from))
}

// copyTreeArgv copies the tree from to the new directory to, keeping
// modes and links, sharing blocks where the file system can.
func copyTreeArgv(from, to string) []string {
	return []string{"cp", "-a", "--reflink=auto", from, to}
}

// extensions are the names of kiln's payload extensions in
// nodelayout.ExtensionsDir (directories named kiln-<version>).
func (a *applier) extensions() ([]string, error) {
	entries, err := os.ReadDir(a.full(nodelayout.ExtensionsDir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() && strings.HasPrefix(e.Name(), nodelayout.PayloadExtension("")) {
			out = append(out, e.Name())
		}
	}
	return out, nil
}
