package suite

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"github.com/kiln-project/kiln/platforms/nodeimage"
)

// The BusyBox of the conformance "busybox" test image: upstream's release,
// built from source. Debian's busybox-static will not do: its ash drops
// environment variables whose names are not shell identifiers (data-1) before
// running a command, and the Secrets and ConfigMap specs that consume them
// through envFrom run `sh -c env` and look for exactly those. Upstream's ash
// passes them on, as the upstream image (docker.io busybox:1.37.0) does.
// The tarball is the Debian archive's copy of upstream's release (the
// .orig.tar.bz2 of the busybox source package, unpatched), so it comes from
// the same apt mirror as everything else, checked against this digest.
const (
	busyboxVersion = "1.37.0"
	busyboxPool    = "pool/main/b/busybox/busybox_" + busyboxVersion + ".orig.tar.bz2"
	busyboxSHA256  = "3311dff32e746499f4df0d5df04d7eb396382d7e108bb9250e7b519b837043a4"
)

// busyboxConfig are the settings changed from BusyBox's defconfig: one
// static binary (the image holds nothing else), and no tc, which no spec
// uses and which does not build against every kernel's headers.
var busyboxConfig = [...]string{"CONFIG_STATIC=y", "# CONFIG_TC is not set"}

// busyboxTools are the host programs the build needs (`make deps` installs
// them: gcc, make, libc6-dev for the static C library, bzip2).
var busyboxTools = [...]string{"cc", "make", "bzip2", "tar"}

// busyboxKey names a BusyBox build: the release, its digest, the
// configuration and the build commands.
func busyboxKey() string {
	h := nodeimage.NewHasher("conformance-busybox/v1")
	h.Add("version", busyboxVersion)
	h.Add("sha256", busyboxSHA256)
	h.Add("config", strings.Join(busyboxConfig[:], "\n"))
	for _, c := range busyboxCmds("TARBALL", "SRC", 0) {
		h.Add("argv", c.String())
	}
	return h.Sum()
}

// busyboxCmds are the commands that unpack the tarball into src and build
// BusyBox there with jobs parallel jobs (0: the number of CPUs). The
// configuration is edited between the second and the third
// (setConfig).
func busyboxCmds(tarball, src string, jobs int) []nodeimage.Command {
	j := "-j"
	if jobs > 0 {
		j += strconv.Itoa(jobs)
	}
	return []nodeimage.Command{
		{Path: "tar", Args: []string{"-xjf", tarball, "-C", src, "--strip-components=1"}},
		{Path: "make", Args: []string{"defconfig"}, Dir: src},
		{Path: "make", Args: []string{j, "busybox"}, Dir: src},
	}
}

// setConfig returns the Kconfig text config with each setting of set
// ("NAME=value" or "# NAME is not set") replacing the line of the same
// name, or appended when there is none.
func setConfig(config string, set []string) string {
	name := func(line string) string {
		if n, ok := strings.CutPrefix(line, "# "); ok {
			n, _, _ = strings.Cut(n, " ")
			return n
		}
		n, _, _ := strings.Cut(line, "=")
		return n
	}
	want := map[string]string{}
	for _, s := range set {
		want[name(s)] = s
	}
	var out []string
	for _, line := range strings.Split(strings.TrimSuffix(config, "\n"), "\n") {
		n := name(line)
		if s, ok := want[n]; ok && strings.HasPrefix(n, "CONFIG_") {
			line = s
			delete(want, n)
		}
		out = append(out, line)
	}
	for _, s := range set {
		if _, ok := want[name(s)]; ok {
			out = append(out, s)
		}
	}
	return strings.Join(out, "\n") + "\n"
}

// ensureBusybox returns the built BusyBox binary, building it unless it is
// cached.
func (b *builder) ensureBusybox(ctx context.Context) (string, error) {
	dir := filepath.Join(b.CacheDir(), "conformance", "busybox-"+busyboxKey())
	bin := filepath.Join(dir, "busybox")
	if exists(bin) {
		return bin, nil
	}
	for _, tool := range busyboxTools {
		if _, err := exec.LookPath(tool); err != nil {
			return "", &nodeimage.PreconditionError{Err: fmt.Errorf("building BusyBox for the conformance images needs %s on the host: apt-get install gcc make libc6-dev bzip2 (make deps installs them)", tool)}
		}
	}
	mirror, err := b.DebianMirror()
	if err != nil {
		return "", err
	}
	tmp, err := nodeimage.Scratch(dir)
	if err != nil {
		return "", err
	}
	end := b.Progress().Start("Building BusyBox " + busyboxVersion + " for the conformance images")
	err = b.buildBusybox(ctx, strings.TrimSuffix(mirror, "/")+"/"+busyboxPool, tmp)
	end(err)
	if err != nil {
		return "", err
	}
	return bin, nodeimage.Publish(tmp, dir)
}

// buildBusybox downloads and checks the release from url, builds it in tmp
// and leaves only tmp/busybox.
func (b *builder) buildBusybox(ctx context.Context, url, tmp string) error {
	tarball := filepath.Join(tmp, "busybox.tar.bz2")
	if err := download(ctx, url, busyboxSHA256, tarball); err != nil {
		return err
	}
	src := filepath.Join(tmp, "src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		return err
	}
	cmds := busyboxCmds(tarball, src, runtime.NumCPU())
	for i, c := range cmds {
		if i == len(cmds)-1 {
			cfg := filepath.Join(src, ".config")
			data, err := os.ReadFile(cfg)
			if err != nil {
				return err
			}
			if err := os.WriteFile(cfg, []byte(setConfig(string(data), busyboxConfig[:])), 0o644); err != nil {
				return err
			}
		}
		if err := b.Run(ctx, c, b.Progress().Update); err != nil {
			return fmt.Errorf("building BusyBox: %w", err)
		}
	}
	if err := os.Rename(filepath.Join(src, "busybox"), filepath.Join(tmp, "busybox")); err != nil {
		return err
	}
	if err := os.RemoveAll(src); err != nil {
		return err
	}
	return os.Remove(tarball)
}

// download saves url to path when its SHA-256 is sum; otherwise it leaves
// no file.
func download(ctx context.Context, url, sum, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("downloading %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("downloading %s: %s", url, resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	h := sha256.New()
	_, err = io.Copy(io.MultiWriter(f, h), resp.Body)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		if got := hex.EncodeToString(h.Sum(nil)); got != sum {
			err = fmt.Errorf("downloading %s: SHA-256 %s, want %s", url, got, sum)
		}
	}
	if err != nil {
		os.Remove(path)
		return err
	}
	return nil
}
