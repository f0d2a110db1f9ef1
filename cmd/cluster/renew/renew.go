// Package renew is `kiln certs renew`: it issues the leaf certificates of
// a cluster again from the CAs in --dir (the API server's, the control
// plane's clients', the front proxy's, the machine-config server's, the
// kubeconfigs' in auth/ and every master's etcd member certificates), puts
// them on the masters through the platform, without the API, and restarts
// only the components that read them at start. With the API up it renews
// one master at a time and waits for each; when the API is down (the
// certificates expired already, which is when users reach for it) it
// renews every master at once, since no master's etcd or API server can
// come back alone.
package renew

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/kiln-project/kiln/assets/ignitionconfigs"
	"github.com/kiln-project/kiln/assets/installconfig"
	kilntls "github.com/kiln-project/kiln/assets/tls"
	"github.com/kiln-project/kiln/cmd/cluster/etcdmembers"
	"github.com/kiln-project/kiln/cmd/cluster/exitcode"
	"github.com/kiln-project/kiln/cmd/cluster/install"
	"github.com/kiln-project/kiln/graph"
	"github.com/kiln-project/kiln/graph/atomicfile"
	"github.com/kiln-project/kiln/graph/installdir"
	"github.com/kiln-project/kiln/ignition"
	"github.com/kiln-project/kiln/ignition/certbundle"
	"github.com/kiln-project/kiln/ignition/nodelayout"
	"github.com/kiln-project/kiln/platforms"
)

// EtcdMembers names the masters' etcd member certificates among the
// certificates a renewal may be limited to; the others are asset IDs.
const EtcdMembers = "etcd-members"

// Names returns what `kiln certs renew` renews, by the names
// `kiln certs check-expiration` shows: the leaf certificate assets of
// --dir that outlive the bootstrap machine, and EtcdMembers.
func Names() []string {
	return append(kilntls.RenewableIDs(), EtcdMembers)
}

// Options are the flags and arguments of kiln certs renew.
type Options struct {
	// Names limits the renewal; empty renews all of Names().
	Names []string
	// Timeout bounds each wait: a master's components, the API, every
	// node Ready.
	Timeout time.Duration
}

// Journal is what --dir records of a renewal under way: a run cut short
// goes on with the certificates it issued, and skips the masters done.
type Journal struct {
	// Run names the renewal on the masters.
	Run string `json:"run"`
	// Names are what it renews.
	Names []string `json:"names"`
	// Done are the masters that run with the new certificates.
	Done []string `json:"done,omitempty"`
	// AtOnce says the API was down when it started: every master at once.
	AtOnce bool `json:"atOnce,omitempty"`
}

// Renewal is one kiln certs renew.
type Renewal struct {
	Cluster *install.Cluster
	Shell   platforms.NodeShell
	// Reissue issues the certificates of ids again in --dir, with every
	// file made from them (graph.WithRenew).
	Reissue func(ctx context.Context, ids []string) error
	// APIReady reports whether the API answers /readyz through the
	// cluster's address.
	APIReady func(ctx context.Context) error
	// API returns the API to wait on, through --dir's admin kubeconfig
	// as it is once renewed.
	API      func() (install.API, error)
	Log      logrus.FieldLogger
	Progress platforms.Progress
	Out      io.Writer
	Now      func() time.Time
}

// CheckNames reports the names that are not renewable, all at once.
func CheckNames(names []string) error {
	var bad []string
	for _, n := range names {
		if !slices.Contains(Names(), n) {
			bad = append(bad, n)
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("cannot renew %s: kiln renews %s (CAs last 10 years; kubelets renew their own certificates)",
			strings.Join(bad, ", "), strings.Join(Names(), ", "))
	}
	return nil
}

// Run renews (see the package comment).
func (r *Renewal) Run(ctx context.Context, o Options) error {
	start := r.Now()
	c := r.Cluster
	j, resumed, err := r.journal(ctx, o)
	if err != nil {
		return err
	}
	masters := c.Machines().Masters
	if len(masters) == 0 {
		return exitcode.With(exitcode.Input, errors.New("the cluster has no master"))
	}
	if resumed {
		fmt.Fprintf(r.Out, "Going on with renewal %s (%d of %d masters done)\n", j.Run, len(j.Done), len(masters))
	}
	files, validity, err := r.masterFiles()
	if err != nil {
		return err
	}
	var todo []string
	for _, m := range masters {
		if !slices.Contains(j.Done, m) {
			todo = append(todo, m)
		}
	}
	if j.AtOnce {
		fmt.Fprintf(r.Out, "The API does not answer: renewing on %s at once\n", strings.Join(todo, ", "))
		errs := make([]error, len(todo))
		var wg sync.WaitGroup
		for i, m := range todo {
			wg.Go(func() { errs[i] = r.master(ctx, j, m, files, validity, o.Timeout) })
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return exitcode.With(exitcode.Install, err)
		}
		j.Done = append(j.Done, todo...)
		if err := graph.SaveRecord(c.Dir, installdir.RenewJournal, j); err != nil {
			return err
		}
	} else {
		for _, m := range todo {
			if err := r.master(ctx, j, m, files, validity, o.Timeout); err != nil {
				return exitcode.With(exitcode.Install, err)
			}
			j.Done = append(j.Done, m)
			if err := graph.SaveRecord(c.Dir, installdir.RenewJournal, j); err != nil {
				return err
			}
		}
	}
	api, err := r.API()
	if err != nil {
		return err
	}
	if _, err := api.API(ctx, api.Server, o.Timeout); err != nil {
		return exitcode.With(exitcode.Install, fmt.Errorf("the API after the renewal: %w", err))
	}
	if err := api.InstallComplete(ctx, c.Nodes(), o.Timeout); err != nil {
		return exitcode.With(exitcode.Install, err)
	}
	w := atomicfile.Writer{Root: c.Dir}
	if err := w.Remove(filepath.Join(c.Dir, filepath.FromSlash(installdir.RenewJournal))); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	fmt.Fprintf(r.Out, "Renewal complete: %s valid until %s on %d masters, every node Ready (%s)\n",
		strings.Join(j.Names, ", "), start.Add(validity).UTC().Format("2006-01-02 15:04 UTC"), len(masters), r.Now().Sub(start).Round(time.Second))
	return nil
}

// journal returns the renewal under way in --dir, or issues the
// certificates again and records a new one. A renewal under way of other
// names is refused.
func (r *Renewal) journal(ctx context.Context, o Options) (Journal, bool, error) {
	dir := r.Cluster.Dir
	names := o.Names
	if len(names) == 0 {
		names = Names()
	}
	var j Journal
	found, err := graph.LoadRecord(dir, installdir.RenewJournal, &j)
	if err != nil {
		return j, false, exitcode.With(exitcode.Input, fmt.Errorf("%s: %w", installdir.RenewJournal, err))
	}
	if found {
		if len(o.Names) > 0 && !sameSet(o.Names, j.Names) {
			return j, false, exitcode.With(exitcode.Input, fmt.Errorf("renewal %s of %s is under way in %s: run kiln certs renew again without names (or with those) to finish it",
				j.Run, strings.Join(j.Names, ", "), dir))
		}
		return j, true, nil
	}
	j = Journal{Run: r.Now().UTC().Format("20060102T150405Z"), Names: names}
	if err := r.APIReady(ctx); err != nil {
		r.Log.Infof("The API does not answer (%v): every master is renewed at once", err)
		j.AtOnce = true
	}
	var ids []string
	for _, n := range names {
		if n != EtcdMembers {
			ids = append(ids, n)
		}
	}
	if len(ids) > 0 {
		end := r.Progress.Start("Issuing " + strings.Join(ids, ", ") + " again")
		err := r.Reissue(ctx, ids)
		end(err)
		if err != nil {
			return j, false, err
		}
	}
	return j, false, graph.SaveRecord(dir, installdir.RenewJournal, j)
}

// masterFiles returns the files of --dir's full master config that a
// renewal puts on the masters, and the leaf lifetime of the cluster. They
// are all of them, renewed or not: a master skips those it has already.
func (r *Renewal) masterFiles() ([]certbundle.File, time.Duration, error) {
	store, err := graph.Open(r.Cluster.Dir, graph.WithLogger(r.Log))
	if err != nil {
		return nil, 0, err
	}
	validity, err := kilntls.LeafValidityOf(store)
	if err != nil {
		return nil, 0, exitcode.With(exitcode.Input, err)
	}
	out, err := MasterFiles(store, r.Cluster.Dir, certbundle.Renewable)
	if err != nil {
		return nil, 0, err
	}
	if len(out) == 0 {
		return nil, 0, errors.New("the full master config holds no certificate a renewal puts on the masters")
	}
	return out, validity, nil
}

// MasterFiles returns the files of the full master config in store (of
// --dir dir) whose paths keep accepts, as a bundle carries them.
func MasterFiles(store *graph.Store, dir string, keep func(path string) bool) ([]certbundle.File, error) {
	master := &ignitionconfigs.MasterConfig{}
	if found, err := store.FromState(master); err != nil || !found {
		return nil, exitcode.With(exitcode.Input, fmt.Errorf("%s is not in the state of %s: %v", master.Name(), dir, err))
	}
	cfg, err := ignition.Parse(master.Config)
	if err != nil {
		return nil, fmt.Errorf("the full master config: %w", err)
	}
	var out []certbundle.File
	for _, f := range cfg.Storage.Files {
		if !keep(f.Path) {
			continue
		}
		data, _, err := ignition.FileContents(cfg, f.Path)
		if err != nil {
			return nil, fmt.Errorf("the full master config: %s: %w", f.Path, err)
		}
		mode := fs.FileMode(0o644)
		if f.Mode != nil {
			mode = fs.FileMode(*f.Mode)
		}
		out = append(out, certbundle.File{Path: f.Path, Mode: mode, Data: data})
	}
	return out, nil
}

// master renews on one master: its own etcd member certificates, issued
// now, and files; then it runs `kiln node certs-install` there, which
// waits for the restarted components.
func (r *Renewal) master(ctx context.Context, j Journal, name string, files []certbundle.File, validity time.Duration, timeout time.Duration) error {
	c := r.Cluster
	t := r.Now()
	b := certbundle.Bundle{Run: j.Run, Files: files}
	if slices.Contains(j.Names, EtcdMembers) {
		member, err := EtcdMemberFiles(ctx, c, name, validity)
		if err != nil {
			return fmt.Errorf("master %s: %w", name, err)
		}
		b.Files = append(slices.Clone(files), member...)
	}
	end := r.Progress.Start("Renewing the certificates of " + name)
	err := RunBundle(ctx, r.Shell, &c.Cluster, name, nodelayout.CertsRenewBundle, b, NodeArgv(timeout, !j.AtOnce))
	end(err)
	if err != nil {
		return fmt.Errorf("master %s: %w", name, err)
	}
	fmt.Fprintf(r.Out, "%s: new certificates in place, API server, controller manager and scheduler restarted (%s)\n",
		name, r.Now().Sub(t).Round(100*time.Millisecond))
	return nil
}

// RunBundle puts bundle (JSON, 0600: it holds keys) at path on node and
// runs argv there, which reads it; a failure carries what argv printed.
func RunBundle(ctx context.Context, shell platforms.NodeShell, c *platforms.Cluster, node, path string, bundle any, argv []string) error {
	data, err := json.Marshal(bundle)
	if err != nil {
		return err
	}
	if err := shell.PutNodeFile(ctx, c, node, path, bytes.NewReader(data), 0o600); err != nil {
		return err
	}
	out, err := shell.RunOnNode(ctx, c, node, argv...)
	if err != nil && len(out) > 0 {
		err = fmt.Errorf("%w\n%s", err, out)
	}
	return err
}

// NodeArgv is the command a master runs for its part of a renewal; lock
// (one master at a time) holds the cluster's renewal lock in etcd, which
// the masters' own renewal timers take too.
func NodeArgv(timeout time.Duration, lock bool) []string {
	return BundleArgv("certs-install", nodelayout.CertsRenewBundle, timeout, lock)
}

// BundleArgv is `kiln node <command>` reading the bundle at path, waiting
// at most timeout, holding the cluster's renewal lock when lock is set.
func BundleArgv(command, path string, timeout time.Duration, lock bool) []string {
	argv := []string{nodelayout.KilnBinary, "node", command, "--bundle=" + path, "--timeout=" + timeout.String()}
	if lock {
		argv = append(argv, "--lock")
	}
	return argv
}

// EtcdMemberFiles issues master name's etcd member certificates for its
// address, from the etcd CA in --dir's state, as the files a master keeps
// them in (the CA's certificate aside).
func EtcdMemberFiles(ctx context.Context, c *install.Cluster, name string, validity time.Duration) ([]certbundle.File, error) {
	ips, ok, err := installconfig.MachineAddresses(c.Config, c.Resolved, c.InfraID, name)
	if err != nil {
		return nil, err
	}
	if !ok || len(ips) == 0 {
		return nil, fmt.Errorf("platform %s does not say its address", c.Config.PlatformName())
	}
	store, err := graph.Open(c.Dir)
	if err != nil {
		return nil, err
	}
	ca := &kilntls.EtcdCA{}
	if found, err := store.FromState(ca); err != nil || !found {
		return nil, fmt.Errorf("%s is not in the state of %s: %v", ca.Name(), c.Dir, err)
	}
	m, err := etcdmembers.Issue(ctx, &ca.CertKey, name, net.IP(ips[0].AsSlice()), validity)
	if err != nil {
		return nil, err
	}
	var out []certbundle.File
	for base, data := range etcdmembers.Files(ca.Cert, m) {
		if base == etcdmembers.CACert {
			continue
		}
		mode := fs.FileMode(0o644)
		if filepath.Ext(base) == ".key" {
			mode = 0o600
		}
		out = append(out, certbundle.File{Path: nodelayout.EtcdPKIDir + "/" + base, Mode: mode, Data: data})
	}
	slices.SortFunc(out, func(a, b certbundle.File) int { return strings.Compare(a.Path, b.Path) })
	return out, nil
}

func sameSet(a, b []string) bool {
	a, b = slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b))
	return slices.Equal(a, b)
}
