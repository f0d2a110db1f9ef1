package restore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/netip"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kiln-project/kiln/assets/bootstraptoken"
	"github.com/kiln-project/kiln/assets/installconfig"
	kilntls "github.com/kiln-project/kiln/assets/tls"
	"github.com/kiln-project/kiln/cmd/cluster/backup"
	"github.com/kiln-project/kiln/cmd/cluster/exitcode"
	"github.com/kiln-project/kiln/graph"
	"github.com/kiln-project/kiln/graph/installdir"
	"github.com/kiln-project/kiln/ignition/nodelayout"
	"github.com/kiln-project/kiln/platforms"
)

// Pending returns the restore under way in dir, if there is one.
func Pending(dir string) (Journal, bool, error) {
	var j Journal
	found, err := graph.LoadRecord(dir, installdir.RestoreJournal, &j)
	if err != nil {
		return j, false, exitcode.With(exitcode.Input, fmt.Errorf("%s: %w", installdir.RestoreJournal, err))
	}
	return j, found, nil
}

// Save records j as the restore under way in dir.
func (j Journal) Save(dir string) error { return graph.SaveRecord(dir, installdir.RestoreJournal, j) }

// Recreates reports whether a restore in dir must re-create the cluster's
// machines before it restores etcd on them, and whether that begins with
// the backup's state (Seed): dir holds no cluster and no restore, or the
// restore under way, j, re-creates and was cut short before the Ignition
// configs were written.
func Recreates(dir string, j Journal, pending bool) (recreate, seed bool, err error) {
	if pending {
		return j.Recreate, j.Recreate && !j.Configs, nil
	}
	st, err := graph.ReadState(dir)
	if err != nil {
		return false, false, err
	}
	empty := len(st.Assets) == 0
	return empty, empty, nil
}

// Reissued returns the IDs of the assets in a backup's state that a
// re-created cluster issues again rather than keeps: every leaf
// certificate (tls.RenewableIDs and the bootstrap machine's etcd serving
// certificate, which may have expired since the backup) and the bootstrap
// credentials, which last 24 hours. The CAs, the service account key, the
// infra ID and the install-config are kept: the restored etcd's objects
// were made with them.
func Reissued() []string {
	return append(kilntls.RenewableIDs(), (&kilntls.EtcdServer{}).ID(),
		(&bootstraptoken.BootstrapToken{}).ID(), (&bootstraptoken.ConfigTokens{}).ID())
}

// Seed begins the re-creation of the cluster of the backup o.From in dir,
// which holds no cluster, or begins it again after a run cut short before
// its Ignition configs were written (prev, pending): it reads the archive
// whole, checks that dir's install-config.yaml, if there is one, is the
// backup's, records the restore and makes the backup's state file dir's.
// The caller then writes the Ignition configs with Reissued issued again,
// and creates the cluster.
func Seed(dir string, o Options, prev Journal, pending bool, now time.Time, out io.Writer) (Journal, error) {
	// A run cut short wrote metadata.json itself, maybe.
	if _, err := graph.ReadFile(dir, installdir.Metadata, graph.OtherInput); err == nil && !pending {
		return prev, exitcode.With(exitcode.Input, fmt.Errorf("--dir: %s holds %s but no state: its cluster may still run; "+
			"remove it with kiln destroy cluster --infra-id before restoring another onto new machines", dir, installdir.Metadata))
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return prev, err
	}
	var state bytes.Buffer
	m, err := readBackup(o.From, o.Identity, backup.Sinks{Dir: map[string]io.Writer{installdir.State: &state}})
	if err != nil {
		return prev, exitcode.With(exitcode.Input, err)
	}
	if !slices.ContainsFunc(m.Files, func(f backup.Member) bool { return f.Name == backup.DirPrefix+installdir.State }) {
		return prev, exitcode.With(exitcode.Input, fmt.Errorf("--from: %s holds no state of a --dir (the cluster took it on its schedule): "+
			"it can restore the etcd of a cluster whose machines exist, not re-create them; restore a backup of kiln backup cluster, "+
			"or create the cluster again first", o.From))
	}
	name := o.From + ": " + backup.DirPrefix + installdir.State
	st, err := graph.ParseState(state.Bytes(), name)
	if err != nil {
		return prev, exitcode.With(exitcode.Input, err)
	}
	if err := sameInstallConfig(dir, st, m); err != nil {
		return prev, exitcode.With(exitcode.Input, err)
	}
	if err := sameRelease(st, m, name); err != nil {
		return prev, exitcode.With(exitcode.Input, err)
	}
	j := Journal{Run: now.UTC().Format("20060102T150405Z"), Snapshot: m.Snapshot.SHA256, Recreate: true}
	if pending {
		if err := prev.sameSnapshot(m, dir); err != nil {
			return prev, err
		}
		j.Run = prev.Run
	}
	// The journal first: a run cut short after it seeds again.
	if err := j.Save(dir); err != nil {
		return prev, err
	}
	if err := graph.SeedState(dir, st); err != nil {
		return j, err
	}
	fmt.Fprintf(out, "Re-creating the machines of cluster %s (infra ID %s, platform %s) from %s, taken %s:\n"+
		"  the same names, addresses, CAs and service account key; new leaf certificates and bootstrap\n"+
		"  credentials. Its etcd is then restored from the backup on them.\n",
		m.Cluster, m.InfraID, m.Platform, o.From, m.TakenAt.Format("2006-01-02 15:04:05 UTC"))
	return j, nil
}

// sameInstallConfig refuses an install-config.yaml in dir that is not the
// one st was made from: the store would take it as the user's edit and
// make a cluster of other names, which the backup's etcd does not match.
func sameInstallConfig(dir string, st *graph.State, m backup.Manifest) error {
	b, err := graph.ReadFile(dir, installdir.InstallConfig, graph.OtherInput)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if st.Recorded(installconfig.ID, installdir.InstallConfig, b) {
		return nil
	}
	return fmt.Errorf("--dir: %s is not the install-config of the backup's cluster %s (%s): the cluster restored onto new machines is the backup's, "+
		"with its names and addresses; move %s away (kiln takes the backup's)", installdir.InstallConfig, m.Cluster, m.InfraID, installdir.InstallConfig)
}

// sameRelease refuses a backup of a cluster that ran another Kubernetes
// release than the one its install-config creates (it was upgraded after
// install): the re-created cluster's API server would serve an etcd
// written by another release, which Kubernetes does not support
// downwards.
func sameRelease(st *graph.State, m backup.Manifest, name string) error {
	e := st.Assets[installconfig.ID]
	if e == nil {
		return fmt.Errorf("%s: no install-config", name)
	}
	var ic installconfig.InstallConfig
	if err := json.Unmarshal(e.Value, &ic); err != nil {
		return fmt.Errorf("%s: its install-config: %w", name, err)
	}
	if err := ic.CheckState(); err != nil {
		return fmt.Errorf("%s: its install-config: %w", name, err)
	}
	res, err := ic.Resolved()
	if err != nil {
		return fmt.Errorf("%s: its install-config: %w", name, err)
	}
	if m.Kubernetes == "" || res.Release.Kubernetes == m.Kubernetes {
		return nil
	}
	return fmt.Errorf("--from: the backup's cluster ran Kubernetes %s, and its install-config creates %s (it was upgraded after install): "+
		"kiln cannot re-create an upgraded cluster's machines yet (they boot the install-config's release); restore it onto its own machines",
		m.Kubernetes, res.Release.Kubernetes)
}

// pruneNodes deletes the Nodes the restored etcd holds of machines that
// the re-created cluster does not have (workers a scale added after
// install, which are not re-created), so that nothing waits for them and
// their pods are scheduled again; it returns their names.
func pruneNodes(ctx context.Context, client kubernetes.Interface, machines []string) ([]string, error) {
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list the Nodes: %w", err)
	}
	var gone []string
	for _, n := range nodes.Items {
		if slices.Contains(machines, n.Name) {
			continue
		}
		if err := client.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return gone, fmt.Errorf("delete Node %s, whose machine is not re-created: %w", n.Name, err)
		}
		gone = append(gone, n.Name)
	}
	return gone, nil
}

// pruned says which Nodes pruneNodes deleted, for the restore's output.
func pruned(gone []string, elapsed time.Duration) string {
	return fmt.Sprintf("Deleted the Nodes of machines the re-created cluster does not have: %s (%s); scale the cluster to add them again",
		strings.Join(gone, ", "), elapsed.Round(100*time.Millisecond))
}

// podNetworkWait bounds the wait for a node's agent to write the CNI
// config of the podCIDR its restored Node names.
const podNetworkWait = 3 * time.Minute

// repairPodNetworks makes the pods of every node run in the podCIDR its
// restored Node names. The re-created cluster's controller manager gave
// each new Node a pod CIDR in the order they registered, which need not
// be the backup's: the restored Nodes bring the backup's back, the node
// agent writes the CNI config for it, but the pods started in between
// hold addresses of the other range, which the routes now send to another
// node, and the pod bridge keeps that range's gateway. For each node it
// waits for the agent's CNI config, removes the bridge's addresses
// outside the Node's podCIDR, and deletes the pods on the pod network
// (their controllers start them again in the right range); it returns
// how many.
func repairPodNetworks(ctx context.Context, client kubernetes.Interface, shell platforms.NodeShell, c *platforms.Cluster, now func() time.Time) (int, error) {
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, fmt.Errorf("list the Nodes: %w", err)
	}
	pods, err := client.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, fmt.Errorf("list the pods: %w", err)
	}
	deleted := 0
	for _, n := range nodes.Items {
		cidr, err := netip.ParsePrefix(n.Spec.PodCIDR)
		if err != nil {
			continue // none yet: nothing started in another range
		}
		if err := waitCNIConfig(ctx, shell, c, n.Name, cidr, now); err != nil {
			return deleted, err
		}
		if err := dropBridgeAddresses(ctx, shell, c, n.Name, cidr); err != nil {
			return deleted, err
		}
		for _, p := range podNetworkPods(pods.Items, n.Name) {
			err := client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				return deleted, fmt.Errorf("delete pod %s/%s, to start it again in %s's pod CIDR %s: %w", p.Namespace, p.Name, n.Name, cidr, err)
			}
			deleted++
		}
	}
	return deleted, nil
}

// podNetworkPods returns the pods on node that are not on the host's
// network. All of them are started again: those started before the agent
// wrote the restored CIDR's config hold the other range, and their
// status may still show the backup's addresses, which lie inside it.
func podNetworkPods(pods []corev1.Pod, node string) []corev1.Pod {
	var out []corev1.Pod
	for _, p := range pods {
		if p.Spec.NodeName == node && !p.Spec.HostNetwork {
			out = append(out, p)
		}
	}
	return out
}

// waitCNIConfig waits until node's CNI config names cidr.
func waitCNIConfig(ctx context.Context, shell platforms.NodeShell, c *platforms.Cluster, node string, cidr netip.Prefix, now func() time.Time) error {
	want := `"subnet": "` + cidr.Masked().String() + `"`
	deadline := now().Add(podNetworkWait)
	for {
		out, err := shell.RunOnNode(ctx, c, node, "cat", nodelayout.CNIConfig)
		if err == nil && strings.Contains(string(out), want) {
			return nil
		}
		if now().After(deadline) {
			return fmt.Errorf("node %s: its pod network agent (kiln-netd) did not write %s for its pod CIDR %s within %s: %v",
				node, nodelayout.CNIConfig, cidr, podNetworkWait, nodeError(errOrMismatch(err), out))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
}

// errOrMismatch is err, or that the file names another range.
func errOrMismatch(err error) error {
	if err != nil {
		return err
	}
	return errors.New("it names another range")
}

// dropBridgeAddresses removes the IPv4 addresses of node's pod bridge
// outside cidr; a node without the bridge has none.
func dropBridgeAddresses(ctx context.Context, shell platforms.NodeShell, c *platforms.Cluster, node string, cidr netip.Prefix) error {
	out, err := shell.RunOnNode(ctx, c, node, "ip", "-4", "-j", "addr", "show", "dev", nodelayout.PodBridge)
	if err != nil {
		return nil // no bridge yet: no pod started
	}
	for _, a := range staleAddresses(out, cidr) {
		if out, err := shell.RunOnNode(ctx, c, node, "ip", "addr", "del", a, "dev", nodelayout.PodBridge); err != nil {
			return fmt.Errorf("node %s: remove %s from %s: %w", node, a, nodelayout.PodBridge, nodeError(err, out))
		}
	}
	return nil
}

// staleAddresses returns the addresses (address/prefix) in the output of
// `ip -4 -j addr show` that lie outside cidr.
func staleAddresses(ipJSON []byte, cidr netip.Prefix) []string {
	var links []struct {
		AddrInfo []struct {
			Local     string `json:"local"`
			PrefixLen int    `json:"prefixlen"`
		} `json:"addr_info"`
	}
	if json.Unmarshal(ipJSON, &links) != nil {
		return nil
	}
	var out []string
	for _, l := range links {
		for _, a := range l.AddrInfo {
			if ip, err := netip.ParseAddr(a.Local); err == nil && !cidr.Contains(ip) {
				out = append(out, fmt.Sprintf("%s/%d", a.Local, a.PrefixLen))
			}
		}
	}
	return out
}
