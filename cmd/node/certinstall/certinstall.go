// Package certinstall is a master's part of `kiln certs renew`: it puts
// the certificates and kubeconfigs kiln issued again in place, restarts
// the control plane components that read theirs only at start (the API
// server, kube-controller-manager, kube-scheduler) through their static
// pods, and waits until they run with them. It needs no API, so it works
// when the certificates have expired already. etcd and the machine-config
// server read their certificates at every TLS handshake and need no
// restart.
package certinstall

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"

	"github.com/kiln-project/kiln/graph/atomicfile"
	"github.com/kiln-project/kiln/ignition/certbundle"
	"github.com/kiln-project/kiln/ignition/nodelayout"
)

// Annotation is the static pod annotation whose value names the renewal a
// component was restarted for: changing it makes the kubelet start the pod
// again.
const Annotation = "kiln.dev/certificates"

// Components returns the static pods a renewal restarts, by manifest file
// and the name of their binary.
func Components() []Component {
	return []Component{
		{Manifest: "kube-apiserver.yaml", Binary: "kube-apiserver"},
		{Manifest: "kube-controller-manager.yaml", Binary: "kube-controller-manager"},
		{Manifest: "kube-scheduler.yaml", Binary: "kube-scheduler"},
	}
}

// Component is a control plane static pod.
type Component struct {
	Manifest, Binary string
}

// Install puts a certbundle.Bundle in place on this master.
type Install struct {
	// Root is prefixed to every path (tests); empty on a master.
	Root string
	// KubeDir is the node's /etc/kubernetes.
	KubeDir string
	// Started returns when the newest process running binary started;
	// ok is false when none runs.
	Started func(binary string) (t time.Time, ok bool, err error)
	// Ready reports whether the local API server answers /readyz with
	// the certificate servingCert.
	Ready func(ctx context.Context, servingCert []byte) error
	// Now is the clock.
	Now func() time.Time
	// Poll is how often it looks again while it waits.
	Poll time.Duration
	// Lock, when set, is held from the first file written until the
	// restarted components run and Settle has passed: the cluster's
	// renewal lock (EtcdLock), so that one master at a time restarts its
	// API server. nil when every master is renewed at once.
	Lock func(ctx context.Context) (unlock func(), err error)
	// Settle is how long the lock is kept once the API server is ready
	// again: load balancers see it back before another master's goes.
	Settle time.Duration
	Log    logrus.FieldLogger
}

// Do writes b's files that differ from the master's, sets Annotation to
// b.Run on the static pods of Components when b holds a file they read at
// start (readAtStart), and waits until each runs a process started since,
// and the API server is ready with its new certificate. A second run of the
// same bundle restarts nothing.
func (in *Install) Do(ctx context.Context, b certbundle.Bundle) error {
	if err := b.Check(); err != nil {
		return err
	}
	unlockNode, err := LockNode(in.Root)
	if err != nil {
		return err
	}
	defer unlockNode()
	if in.Lock != nil {
		unlock, err := in.Lock(ctx)
		if err != nil {
			return err
		}
		defer unlock()
	}
	var serving []byte
	for _, f := range b.Files {
		p := filepath.Join(in.Root, filepath.FromSlash(f.Path))
		if f.Path == path.Join(nodelayout.PKIDir, "apiserver.crt") {
			serving = f.Data
		}
		if old, err := os.ReadFile(p); err == nil && bytes.Equal(old, f.Data) {
			continue
		}
		if err := atomicfile.Write(p, f.Data, f.Mode); err != nil {
			return err
		}
		in.Log.Infof("renewed %s", f.Path)
	}
	since := in.Now()
	var restarted []Component
	if !readAtStart(b) {
		// Only etcd's and the config server's: read at every handshake.
		return nil
	}
	for _, c := range Components() {
		p := filepath.Join(in.Root, in.KubeDir, nodelayout.StaticPodsSubdir, c.Manifest)
		changed, err := Annotate(p, b.Run)
		if errors.Is(err, fs.ErrNotExist) {
			continue // not active on this master (a staged control plane reads the new files when it starts)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		if changed {
			in.Log.Infof("restarting %s for renewal %s", c.Binary, b.Run)
			restarted = append(restarted, c)
		}
	}
	if len(restarted) > 0 {
		if err := atomicfile.SyncDir(filepath.Join(in.Root, in.KubeDir, nodelayout.StaticPodsSubdir)); err != nil {
			return err
		}
	}
	if err := in.wait(ctx, restarted, since, serving); err != nil {
		return err
	}
	if in.Lock != nil && len(restarted) > 0 && in.Settle > 0 {
		select {
		case <-time.After(in.Settle):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// wait waits until every component of restarted runs a process started
// after since, then for the API server to be ready with serving.
func (in *Install) wait(ctx context.Context, restarted []Component, since time.Time, serving []byte) error {
	last := ""
	err := wait.PollUntilContextCancel(ctx, in.Poll, true, func(ctx context.Context) (bool, error) {
		for _, c := range restarted {
			t, ok, err := in.Started(c.Binary)
			if err != nil {
				return false, err
			}
			if !ok || t.Before(since) {
				last = c.Binary + " has not restarted yet"
				return false, nil
			}
		}
		if serving == nil {
			return true, nil
		}
		if err := in.Ready(ctx, serving); err != nil {
			last = "the API server: " + err.Error()
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("%w: %s", err, last)
	}
	return nil
}

// readAtStart reports whether b holds a file that a component of
// Components reads only when it starts: anything but etcd's member
// certificates and the machine-config server's, which those read at every
// TLS handshake. It looks at the bundle, not at what changed on disk, so a
// run cut short after writing still restarts them when run again.
func readAtStart(b certbundle.Bundle) bool {
	for _, f := range b.Files {
		if dir := path.Dir(f.Path); dir != nodelayout.EtcdPKIDir && dir != nodelayout.MCSConfigDir {
			return true
		}
	}
	return false
}

// LockNode takes this node's lock of certificate changes (a renewal's or
// a CA rotation's): two runs take turns. It returns its release.
func LockNode(root string) (func(), error) {
	lock, err := os.OpenFile(filepath.Join(root, nodelayout.KilnConfigDir, ".certs-install.lock"), os.O_CREATE|os.O_RDWR|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		lock.Close()
		return nil, fmt.Errorf("lock %s: %w", lock.Name(), err)
	}
	return func() { lock.Close() }, nil
}

// Annotate sets Annotation to run in the static pod manifest at p; changed
// is false when it had it already. The manifest keeps its text; the line
// goes under metadata.
func Annotate(p, run string) (changed bool, err error) {
	data, err := os.ReadFile(p)
	if err != nil {
		return false, err
	}
	line := fmt.Sprintf("    %s: %q", Annotation, run)
	re := regexp.MustCompile(`(?m)^    ` + regexp.QuoteMeta(Annotation) + `: .*$`)
	var out []byte
	meta := regexp.MustCompile(`(?m)^metadata:\n`)
	switch loc := meta.FindIndex(data); {
	case re.Match(data):
		out = re.ReplaceAllLiteral(data, []byte(line))
	case loc != nil:
		out = slices.Concat(data[:loc[1]], []byte("  annotations:\n"+line+"\n"), data[loc[1]:])
	default:
		return false, errors.New("no metadata: line")
	}
	if bytes.Equal(out, data) {
		return false, nil
	}
	var pod corev1.Pod
	if err := yaml.UnmarshalStrict(out, &pod); err != nil {
		return false, fmt.Errorf("the annotated manifest does not parse: %w", err)
	}
	if pod.Annotations[Annotation] != run {
		return false, errors.New("the annotated manifest lost the annotation")
	}
	info, err := os.Stat(p)
	if err != nil {
		return false, err
	}
	return true, atomicfile.Write(p, out, info.Mode().Perm())
}

// userHZ is the kernel's clock ticks a second in /proc (USER_HZ).
const userHZ = 100

// Started returns when the newest process of binary (its argv[0]'s base
// name) under the /proc at procDir started.
func Started(procDir, binary string) (time.Time, bool, error) {
	boot, err := bootTime(procDir)
	if err != nil {
		return time.Time{}, false, err
	}
	entries, err := os.ReadDir(procDir)
	if err != nil {
		return time.Time{}, false, err
	}
	var newest time.Time
	found := false
	for _, e := range entries {
		if strings.Trim(e.Name(), "0123456789") != "" {
			continue
		}
		cmd, err := os.ReadFile(filepath.Join(procDir, e.Name(), "cmdline"))
		if err != nil || filepath.Base(string(bytes.SplitN(cmd, []byte{0}, 2)[0])) != binary {
			continue
		}
		stat, err := os.ReadFile(filepath.Join(procDir, e.Name(), "stat"))
		if err != nil {
			continue // gone
		}
		t, err := startTime(stat, boot)
		if err != nil {
			return time.Time{}, false, fmt.Errorf("process %s: %w", e.Name(), err)
		}
		if !found || t.After(newest) {
			newest, found = t, true
		}
	}
	return newest, found, nil
}

// bootTime is the kernel's boot time (btime in /proc/stat).
func bootTime(procDir string) (time.Time, error) {
	data, err := os.ReadFile(filepath.Join(procDir, "stat"))
	if err != nil {
		return time.Time{}, err
	}
	for _, l := range strings.Split(string(data), "\n") {
		var secs int64
		if n, _ := fmt.Sscanf(l, "btime %d", &secs); n == 1 {
			return time.Unix(secs, 0), nil
		}
	}
	return time.Time{}, errors.New("no btime in " + filepath.Join(procDir, "stat"))
}

// startTime reads field 22 of a /proc/<pid>/stat line: the start time in
// clock ticks after boot.
func startTime(stat []byte, boot time.Time) (time.Time, error) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return time.Time{}, errors.New("stat has no command name")
	}
	fields := strings.Fields(string(stat[i+1:]))
	// fields[0] is field 3 (state); the start time is field 22.
	if len(fields) < 20 {
		return time.Time{}, errors.New("stat is too short")
	}
	var ticks int64
	if _, err := fmt.Sscanf(fields[19], "%d", &ticks); err != nil {
		return time.Time{}, fmt.Errorf("start time %q: %w", fields[19], err)
	}
	return boot.Add(time.Duration(ticks) * time.Second / userHZ), nil
}

// LocalReady asks the API server on this master for /readyz, trusting
// only the CA at caFile, and checks that it serves servingCert.
func LocalReady(caFile string) func(ctx context.Context, servingCert []byte) error {
	return func(ctx context.Context, servingCert []byte) error {
		ca, err := os.ReadFile(caFile)
		if err != nil {
			return err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(ca) {
			return fmt.Errorf("%s holds no certificate", caFile)
		}
		want, _ := pem.Decode(servingCert)
		if want == nil {
			return errors.New("the new serving certificate is not PEM")
		}
		client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
			RootCAs: pool, ServerName: "localhost",
			VerifyConnection: func(cs tls.ConnectionState) error {
				if len(cs.PeerCertificates) == 0 || !bytes.Equal(cs.PeerCertificates[0].Raw, want.Bytes) {
					return errors.New("it serves its old certificate still")
				}
				return nil
			},
		}}}
		defer client.CloseIdleConnections()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://127.0.0.1:6443/readyz", nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("/readyz answers %s", resp.Status)
		}
		return nil
	}
}
