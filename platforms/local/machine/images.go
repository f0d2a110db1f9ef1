package machine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"
)

// containerdRoot is containerd's root inside a machine; it is one of
// hostBinds, a plain host directory.
const containerdRoot = "/var/lib/containerd"

// importDir is where ImportImageArchive stages an archive, inside the
// machine: below containerd's root, which is a plain host directory, so
// the archive is linked or copied once and never lands on the overlay root
// (containerd ignores what it does not know in its root).
const importDir = containerdRoot + "/kiln-import"

// importImageArgv is the command, run inside a machine, that imports the
// docker or OCI archive at inside into containerd's namespace k8s.io, where
// kubelet (CRI) finds its images. Only the machine's own platform is
// imported and unpacked, as the node image imports its own images.
func importImageArgv(inside string) []string {
	return []string{"ctr", "--namespace", "k8s.io", "images", "import", inside}
}

// ImportImageArchive imports the docker or OCI image archive at archive (a
// host path) into the running machine's containerd, namespace k8s.io, so
// that pods with imagePullPolicy Never or IfNotPresent use it without
// pulling. The archive is staged under the machine's containerd directory
// (a hard link when the file system allows, else a copy) and removed
// afterwards.
func (m *Manager) ImportImageArchive(ctx context.Context, name, archive string) error {
	st, err := m.State(ctx, name)
	if err != nil {
		return err
	}
	if st != StateRunning {
		return fmt.Errorf("machine %s is %s", name, st)
	}
	hostDir := filepath.Join(m.dir(name), hostBindDir(containerdRoot), path.Base(importDir))
	staged, err := stageFile(archive, hostDir)
	if err != nil {
		return fmt.Errorf("staging %s for machine %s: %w", archive, name, err)
	}
	defer os.Remove(staged)
	err = whileRestarting(ctx, importRetry, importRetryPause, func() error {
		_, err := m.Exec(ctx, name, importImageArgv(path.Join(importDir, filepath.Base(staged)))...)
		return err
	})
	if err != nil {
		return fmt.Errorf("importing %s into machine %s: %w", archive, name, err)
	}
	return nil
}

// How long an import retries while the machine's containerd restarts: a
// node restarts it once at first boot, when its pod network is configured
// (kiln node's CNI setup), and a machine added to a running cluster gets
// its images right then.
const (
	importRetry      = 2 * time.Minute
	importRetryPause = 2 * time.Second
)

// restartMarkers are in the error of a ctr command whose containerd went
// away under it or is not listening yet: nothing it asked was refused.
// containerd 2's ctr checks for the socket before it dials ("cannot
// access socket"), and a restarting containerd has removed it.
var restartMarkers = [...]string{
	"error reading from server: EOF", "transport is closing", "connection refused",
	"connection reset by peer", "containerd.sock: connect: no such file or directory",
	"ctr: cannot access socket",
}

// containerdRestarting reports whether err is only containerd restarting.
func containerdRestarting(err error) bool {
	for _, m := range restartMarkers {
		if strings.Contains(err.Error(), m) {
			return true
		}
	}
	return false
}

// whileRestarting runs run, and again every pause while it fails because
// containerd restarts, for up to within; the error is the last one.
func whileRestarting(ctx context.Context, within, pause time.Duration, run func() error) error {
	deadline := time.Now().Add(within)
	for {
		err := run()
		if err == nil || !containerdRestarting(err) || time.Now().Add(pause).After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(pause):
		}
	}
}

// stageFile makes src available as a new file in dir (created 0700): a hard
// link when src is on the same file system and linking is allowed, else a
// copy (0600). It returns the new file's path; the caller removes it.
func stageFile(src, dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	dst := filepath.Join(dir, "archive-"+hex.EncodeToString(b[:])+".tar")
	return dst, linkOrCopy(src, dst, 0o600)
}

// linkOrCopy makes dst, which must not exist, a hard link of the regular
// file src when the file system allows, else a copy of it with mode.
func linkOrCopy(src, dst string, mode os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	if st, err := in.Stat(); err != nil {
		return err
	} else if !st.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", src)
	}
	if err := os.Link(src, dst); err == nil {
		return nil
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	_, cerr := io.Copy(out, in)
	if err := errors.Join(cerr, out.Close()); err != nil {
		os.Remove(dst)
		return err
	}
	return nil
}
