// Package rotateca is `kiln certs rotate-ca`: it replaces the cluster's
// four CAs (the root CA, the kubelet serving CA, the etcd CA and the
// front-proxy CA) with new ones while the cluster runs, and no node joins
// again. It goes in phases (certbundle.Phases), each on every node through
// the platform (`kiln node ca-rotate`), masters one at a time:
//
//  1. introduce: every trust file and kubeconfig trusts the old and the
//     new CAs; etcd, the control plane, the kubelets and kiln-netd restart;
//     the cluster's Deployments, DaemonSets and StatefulSets restart so
//     their pods read the two CAs kube-controller-manager publishes in
//     kube-root-ca.crt.
//  2. reissue: the new CAs go into --dir (its state, auth/, the Ignition
//     configs), every leaf of the masters is issued again from them, and
//     kube-controller-manager signs with them.
//  3. kubelets: every kubelet gets a client certificate from the new root
//     CA and requests a serving certificate from the new kubelet serving
//     CA.
//  4. retire: every trust file and kubeconfig trusts the new CAs only; the
//     workloads restart again, so nothing trusts the old CAs.
//
// The journal in --dir (installdir.RotateCAJournal) holds the phase, the
// nodes done in it and both CAs of each kind: a run cut short goes on
// where it stopped, with the same new CAs. Not rotated: the service
// account key pair (not a CA), and a bare pod keeps trusting the old CA
// until it is re-created.
package rotateca

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sirupsen/logrus"

	kilntls "github.com/kiln-project/kiln/assets/tls"
	"github.com/kiln-project/kiln/cmd/cluster/exitcode"
	"github.com/kiln-project/kiln/cmd/cluster/install"
	"github.com/kiln-project/kiln/cmd/cluster/renew"
	"github.com/kiln-project/kiln/graph"
	"github.com/kiln-project/kiln/graph/atomicfile"
	"github.com/kiln-project/kiln/graph/installdir"
	"github.com/kiln-project/kiln/ignition/certbundle"
	"github.com/kiln-project/kiln/ignition/nodelayout"
	"github.com/kiln-project/kiln/platforms"
)

// Feature is what every node's kiln must answer `kiln node supports` yes
// to before a rotation starts.
const Feature = "ca-rotation"

// Journal is what --dir records of a rotation under way.
type Journal struct {
	// Run names the rotation.
	Run string `json:"run"`
	// Phase is the phase under way (certbundle.Phases).
	Phase string `json:"phase"`
	// Done are the nodes that have finished Phase.
	Done []string `json:"done,omitempty"`
	// Old are the certificates of the CAs being replaced, by asset ID.
	Old map[string][]byte `json:"old"`
	// New are the new CAs, by asset ID: secrets.
	New map[string]kilntls.CertKey `json:"new"`
}

// Options are the flags of kiln certs rotate-ca.
type Options struct {
	// Timeout bounds each wait: a node's components, the API, every node
	// Ready, the workloads' rollouts.
	Timeout time.Duration
}

// Rotation is one kiln certs rotate-ca.
type Rotation struct {
	Cluster *install.Cluster
	Shell   platforms.NodeShell
	// Reissue makes --dir's state, auth/ and Ignition configs again from
	// the CA files written into --dir (with no ids: what changed).
	Reissue func(ctx context.Context, ids []string) error
	// API returns the API through --dir's admin kubeconfig as it is now.
	API func() (install.API, error)
	// Refresh gives the platform's own clients of the API on the host
	// (local's LoadBalancer Service controller) --dir's admin kubeconfig
	// once the reissue phase made it new; nil when the platform has none.
	Refresh  func(ctx context.Context) error
	Log      logrus.FieldLogger
	Progress platforms.Progress
	Out      io.Writer
	Now      func() time.Time
}

// Run rotates (see the package comment).
func (r *Rotation) Run(ctx context.Context, o Options) error {
	start := r.Now()
	c := r.Cluster
	if found, err := graph.LoadRecord(c.Dir, installdir.RenewJournal, &struct{}{}); err != nil || found {
		return exitcode.With(exitcode.Input, fmt.Errorf("a kiln certs renew is under way in %s (%s): run it again to finish it first (%v)", c.Dir, installdir.RenewJournal, err))
	}
	if err := r.preflight(ctx); err != nil {
		return err
	}
	j, resumed, err := r.journal(ctx)
	if err != nil {
		return err
	}
	if resumed {
		fmt.Fprintf(r.Out, "Going on with CA rotation %s at phase %s (%d nodes done in it)\n", j.Run, j.Phase, len(j.Done))
	}
	phases := certbundle.Phases()
	for i := slices.Index(phases, j.Phase); i >= 0 && i < len(phases); i++ {
		if j.Phase != phases[i] {
			j.Phase, j.Done = phases[i], nil
			if err := graph.SaveRecord(c.Dir, installdir.RotateCAJournal, j); err != nil {
				return err
			}
		}
		t := r.Now()
		if err := r.phase(ctx, &j, o.Timeout); err != nil {
			return err
		}
		fmt.Fprintf(r.Out, "Phase %s done (%s)\n", j.Phase, r.Now().Sub(t).Round(time.Second))
	}
	w := atomicfile.Writer{Root: c.Dir}
	if err := w.Remove(filepath.Join(c.Dir, filepath.FromSlash(installdir.RotateCAJournal))); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	fmt.Fprintf(r.Out, "CA rotation complete: %s replaced on %d nodes, auth/ and the Ignition configs in %s use them (%s)\n",
		strings.Join(kilntls.RotatedCAIDs(), ", "), c.Nodes(), c.Dir, r.Now().Sub(start).Round(time.Second))
	return nil
}

// UnderWay reports, as an error naming it, a rotation under way in dir
// (its journal): what would issue or place certificates from --dir's CAs
// meanwhile (kiln certs renew, kiln upgrade cluster, kiln scale cluster)
// must wait for it to finish.
func UnderWay(dir, what string) error {
	var j Journal
	found, err := graph.LoadRecord(dir, installdir.RotateCAJournal, &j)
	if err != nil {
		return exitcode.With(exitcode.Input, fmt.Errorf("%s: %w", installdir.RotateCAJournal, err))
	}
	if !found {
		return nil
	}
	return exitcode.With(exitcode.Input, fmt.Errorf("CA rotation %s is under way in %s (phase %s): run kiln certs rotate-ca to finish it before %s", j.Run, dir, j.Phase, what))
}

// preflight refuses a cluster with a node whose kiln has no part of a
// rotation (made by an older kiln), naming every such node, before
// anything changes.
func (r *Rotation) preflight(ctx context.Context) error {
	c := r.Cluster
	end := r.Progress.Start("Checking that every node's kiln can take part in a CA rotation")
	var bad []string
	for _, n := range c.Machines().All() {
		if out, err := r.Shell.RunOnNode(ctx, &c.Cluster, n, nodelayout.KilnBinary, "node", "supports", Feature); err != nil {
			r.Log.Debugf("%s: kiln node supports %s: %v: %s", n, Feature, err, out)
			bad = append(bad, n)
		}
	}
	if len(bad) > 0 {
		err := fmt.Errorf("the kiln on %s cannot take part in a CA rotation (it predates it, or the node does not answer); this run changed nothing. "+
			"Reach every node first; a cluster made by an older kiln can be moved to new machines with kiln backup cluster, destroy cluster, create cluster and restore cluster",
			strings.Join(bad, ", "))
		end(err)
		return exitcode.With(exitcode.Input, err)
	}
	end(nil)
	return nil
}

// journal returns the rotation under way in --dir, or starts one: the
// API must answer, the old CAs are read from the state and new ones
// issued.
func (r *Rotation) journal(ctx context.Context) (Journal, bool, error) {
	dir := r.Cluster.Dir
	var j Journal
	found, err := graph.LoadRecord(dir, installdir.RotateCAJournal, &j)
	if err != nil {
		return j, false, exitcode.With(exitcode.Input, fmt.Errorf("%s: %w", installdir.RotateCAJournal, err))
	}
	if found {
		return j, true, nil
	}
	api, err := r.API()
	if err != nil {
		return j, false, err
	}
	if err := api.InstallComplete(ctx, r.Cluster.Nodes(), time.Minute); err != nil {
		return j, false, exitcode.With(exitcode.Install, fmt.Errorf("a CA rotation starts on a healthy cluster only; this run changed nothing: %w", err))
	}
	store, err := graph.Open(dir, graph.WithLogger(r.Log))
	if err != nil {
		return j, false, err
	}
	cas, alg, err := statedCAs(store)
	if err != nil {
		return j, false, exitcode.With(exitcode.Input, err)
	}
	j = Journal{Run: r.Now().UTC().Format("20060102T150405Z"), Phase: certbundle.PhaseIntroduce, Old: map[string][]byte{}, New: map[string]kilntls.CertKey{}}
	for id, ck := range cas {
		j.Old[id] = ck.Cert
		if j.New[id], err = kilntls.NewCA(ctx, alg, id); err != nil {
			return j, false, err
		}
	}
	return j, false, graph.SaveRecord(dir, installdir.RotateCAJournal, j)
}

// statedCAs returns the CAs in store's state by asset ID, and the key
// algorithm of the cluster.
func statedCAs(store *graph.Store) (map[string]kilntls.CertKey, kilntls.Algorithm, error) {
	root, ksca, etcd, fp, alg := &kilntls.RootCA{}, &kilntls.KubeletServingCA{}, &kilntls.EtcdCA{}, &kilntls.FrontProxyCA{}, &kilntls.KeyAlgorithm{}
	for _, a := range []graph.Asset{root, ksca, etcd, fp, alg} {
		if found, err := store.FromState(a); err != nil || !found {
			return nil, "", fmt.Errorf("%s is not in the state of --dir: %v", a.Name(), err)
		}
	}
	return map[string]kilntls.CertKey{root.ID(): root.CertKey, ksca.ID(): ksca.CertKey, etcd.ID(): etcd.CertKey, fp.ID(): fp.CertKey}, alg.Algorithm, nil
}

// phase runs j.Phase on every node not done, then what the cluster needs
// after it.
func (r *Rotation) phase(ctx context.Context, j *Journal, timeout time.Duration) error {
	c := r.Cluster
	m := c.Machines()
	store, err := graph.Open(c.Dir, graph.WithLogger(r.Log))
	if err != nil {
		return err
	}
	validity, err := kilntls.LeafValidityOf(store)
	if err != nil {
		return exitcode.With(exitcode.Input, err)
	}
	alg := &kilntls.KeyAlgorithm{}
	if found, err := store.FromState(alg); err != nil || !found {
		return exitcode.With(exitcode.Input, fmt.Errorf("%s is not in the state of %s: %v", alg.Name(), c.Dir, err))
	}
	var full, signing []certbundle.File
	if j.Phase == certbundle.PhaseIntroduce {
		cas, _, err := statedCAs(store)
		if err != nil {
			return exitcode.With(exitcode.Input, err)
		}
		signing = signingFiles(cas)
	}
	if j.Phase == certbundle.PhaseReissue {
		if err := r.reissueDir(ctx, j); err != nil {
			return err
		}
		// The state as reissueDir left it.
		if store, err = graph.Open(c.Dir, graph.WithLogger(r.Log)); err != nil {
			return err
		}
		if full, err = r.masterFiles(store); err != nil {
			return err
		}
	}
	root, ksca := (&kilntls.RootCA{}).ID(), (&kilntls.KubeletServingCA{}).ID()
	bundle := func(node string, master bool) (certbundle.Rotation, error) {
		b := certbundle.Rotation{Run: j.Run, Phase: j.Phase, Rotating: j.Phase != certbundle.PhaseRetire, KubeconfigCA: trust(j, root)}
		switch j.Phase {
		case certbundle.PhaseIntroduce, certbundle.PhaseRetire:
			b.Files = trustFiles(j, master)
			if master {
				b.Files = append(b.Files, signing...)
			}
		case certbundle.PhaseReissue:
			member, err := renew.EtcdMemberFiles(ctx, c, node, validity)
			if err != nil {
				return b, err
			}
			b.Files = slices.Concat(full, member)
		case certbundle.PhaseKubelets:
			ca := j.New[root]
			pair, err := kilntls.IssueKubeletClient(ctx, alg.Algorithm, &ca, node, validity)
			if err != nil {
				return b, err
			}
			b.KubeletClient = slices.Concat(pair.Cert, pair.Key)
			b.KubeletServingCA = j.New[ksca].Cert
		}
		return b, nil
	}
	if err := r.nodes(ctx, j, m.Masters, true, bundle, timeout); err != nil {
		return err
	}
	if j.Phase != certbundle.PhaseReissue {
		if err := r.nodes(ctx, j, m.Workers, false, bundle, timeout); err != nil {
			return err
		}
	}
	return r.after(ctx, j, timeout)
}

// nodes runs b's phase on names: masters one at a time (holding the
// cluster's renewal lock), workers all at once.
func (r *Rotation) nodes(ctx context.Context, j *Journal, names []string, masters bool, b func(string, bool) (certbundle.Rotation, error), timeout time.Duration) error {
	var todo []string
	for _, n := range names {
		if !slices.Contains(j.Done, n) {
			todo = append(todo, n)
		}
	}
	var mu sync.Mutex
	done := func(n string) error {
		mu.Lock()
		defer mu.Unlock()
		j.Done = append(j.Done, n)
		return graph.SaveRecord(r.Cluster.Dir, installdir.RotateCAJournal, *j)
	}
	one := func(n string) error {
		bundle, err := b(n, masters)
		if err != nil {
			return fmt.Errorf("%s: %w", n, err)
		}
		if err := r.node(ctx, n, bundle, masters, timeout); err != nil {
			return err
		}
		return done(n)
	}
	if masters {
		for _, n := range todo {
			if err := one(n); err != nil {
				return exitcode.With(exitcode.Install, err)
			}
		}
		return nil
	}
	errs := make([]error, len(todo))
	var wg sync.WaitGroup
	for i, n := range todo {
		wg.Go(func() { errs[i] = one(n) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return exitcode.With(exitcode.Install, err)
	}
	return nil
}

// node sends b to node and runs its part there.
func (r *Rotation) node(ctx context.Context, node string, b certbundle.Rotation, master bool, timeout time.Duration) error {
	c := r.Cluster
	t := r.Now()
	end := r.Progress.Start(fmt.Sprintf("CA rotation, phase %s: %s", b.Phase, node))
	err := renew.RunBundle(ctx, r.Shell, &c.Cluster, node, nodelayout.CARotationBundle, b, NodeArgv(timeout, master))
	end(err)
	if err != nil {
		return fmt.Errorf("%s: %w", node, err)
	}
	r.Log.Infof("%s: phase %s done (%s)", node, b.Phase, r.Now().Sub(t).Round(100*time.Millisecond))
	return nil
}

// NodeArgv is the command a node runs for its part of a phase; a master
// holds the cluster's renewal lock while its components restart.
func NodeArgv(timeout time.Duration, master bool) []string {
	return renew.BundleArgv("ca-rotate", nodelayout.CARotationBundle, timeout, master)
}

// trust returns what a trust file of CA id holds in j's phase: the old
// and the new certificate until the retire phase, then the new only.
func trust(j *Journal, id string) []byte {
	if j.Phase == certbundle.PhaseRetire {
		return slices.Clone(j.New[id].Cert)
	}
	return slices.Concat(j.Old[id], j.New[id].Cert)
}

// trustFiles are the trust files of a node in j's phase.
func trustFiles(j *Journal, master bool) []certbundle.File {
	root, ksca, etcd, fp := (&kilntls.RootCA{}).ID(), (&kilntls.KubeletServingCA{}).ID(), (&kilntls.EtcdCA{}).ID(), (&kilntls.FrontProxyCA{}).ID()
	file := func(p string, data []byte) certbundle.File { return certbundle.File{Path: p, Mode: 0o644, Data: data} }
	files := []certbundle.File{file(nodelayout.PKIDir+"/ca.crt", trust(j, root))}
	if !master {
		return files
	}
	files = append(files,
		file(nodelayout.PKIDir+"/client-ca.crt", trust(j, root)),
		file(nodelayout.PKIDir+"/kubelet-serving-ca.crt", trust(j, ksca)),
		file(nodelayout.PKIDir+"/front-proxy-ca.crt", trust(j, fp)),
		file(nodelayout.EtcdPKIDir+"/ca.crt", trust(j, etcd)),
	)
	return files
}

// signingFiles are kube-controller-manager's copies of the CAs it signs
// with (cas: the state's), which the introduce phase writes first: a
// cluster made before them lacks them, and its manifest moves to them.
func signingFiles(cas map[string]kilntls.CertKey) []certbundle.File {
	root, ksca := cas[(&kilntls.RootCA{}).ID()], cas[(&kilntls.KubeletServingCA{}).ID()]
	return []certbundle.File{
		{Path: nodelayout.SigningCA + ".crt", Mode: 0o644, Data: root.Cert},
		{Path: nodelayout.SigningCA + ".key", Mode: 0o600, Data: root.Key},
		{Path: nodelayout.SigningKubeletServingCA + ".crt", Mode: 0o644, Data: ksca.Cert},
		{Path: nodelayout.SigningKubeletServingCA + ".key", Mode: 0o600, Data: ksca.Key},
	}
}

// reissueDir puts the new CAs into --dir and makes everything from them
// again, unless the state has them already (a run cut short after it).
func (r *Rotation) reissueDir(ctx context.Context, j *Journal) error {
	dir := r.Cluster.Dir
	store, err := graph.Open(dir, graph.WithLogger(r.Log))
	if err != nil {
		return err
	}
	cas, _, err := statedCAs(store)
	if err != nil {
		return exitcode.With(exitcode.Input, err)
	}
	var pending []string
	for id, ck := range j.New {
		if !bytes.Equal(cas[id].Cert, ck.Cert) {
			pending = append(pending, id)
		}
	}
	if len(pending) == 0 {
		return nil
	}
	slices.Sort(pending)
	w := atomicfile.Writer{Root: dir}
	for _, id := range pending {
		base := filepath.Join(dir, filepath.FromSlash(id))
		if err := w.MkdirAll(filepath.Dir(base), 0o700); err != nil {
			return err
		}
		if err := w.Write(base+".key", j.New[id].Key, 0o600); err != nil {
			return err
		}
		if err := w.Write(base+".crt", j.New[id].Cert, 0o644); err != nil {
			return err
		}
	}
	end := r.Progress.Start("Issuing every certificate of " + dir + " again from the new CAs")
	err = r.Reissue(ctx, nil)
	end(err)
	return err
}

// masterFiles returns what the reissue phase writes on a master: every
// file of --dir's full master config that a rotation may write, but the
// trust files (bundles until the retire phase).
func (r *Rotation) masterFiles(store *graph.Store) ([]certbundle.File, error) {
	skip := map[string]bool{}
	for _, f := range trustFiles(&Journal{}, true) {
		skip[f.Path] = true
	}
	return renew.MasterFiles(store, r.Cluster.Dir, func(p string) bool { return !skip[p] && certbundle.RotationWritable(p) })
}
