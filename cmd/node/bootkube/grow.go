package bootkube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kiln-project/kiln/assets/manifests"
	kilntls "github.com/kiln-project/kiln/assets/tls"
	"github.com/kiln-project/kiln/cmd/cluster/etcdmembers"
	"github.com/kiln-project/kiln/cmd/cluster/handover"
	"github.com/kiln-project/kiln/ignition/nodelayout"
)

// master is a registered master node.
type master struct {
	Name string `json:"name"`
	IP   string `json:"ip"`
}

// errNotYet is a step that made progress or is waiting; poll retries it.
type errNotYet string

func (e errNotYet) Error() string { return string(e) }

// grower grows etcd from the bootstrap member onto the masters.
type grower struct {
	cfg      Config
	client   kubernetes.Interface
	etcd     etcdmembers.Client
	closeFn  func() error
	ca       *kilntls.CertKey
	manifest string
	// dialEtcd connects to etcd for the handover; dialing with bootkube's
	// client certificate when nil (tests set it).
	dialEtcd func(endpoints []string) (etcdClient, error)
}

// etcdClient is what the handover asks of etcd: membership, status and
// leadership. *clientv3.Client has it.
type etcdClient interface {
	etcdmembers.Client
	MoveLeader(ctx context.Context, transfereeID uint64) (*clientv3.MoveLeaderResponse, error)
	Close() error
}

// dialHandover connects to etcd at endpoints for the handover.
func (g *grower) dialHandover(endpoints []string) (etcdClient, error) {
	if g.dialEtcd != nil {
		return g.dialEtcd(endpoints)
	}
	return dial(g.cfg, endpoints)
}

func newGrower(cfg Config, client kubernetes.Interface) (*grower, error) {
	ca, err := etcdmembers.LoadCA(cfg.EtcdPKIDir)
	if err != nil {
		return nil, fmt.Errorf("etcd CA: %w", err)
	}
	manifest, err := os.ReadFile(cfg.MasterEtcdManifest)
	if err != nil {
		return nil, err
	}
	if !strings.Contains(string(manifest), manifests.EtcdInitialClusterMarker) {
		return nil, fmt.Errorf("%s does not contain %s", cfg.MasterEtcdManifest, manifests.EtcdInitialClusterMarker)
	}
	etcd, err := dial(cfg, []string{localEtcd})
	if err != nil {
		return nil, fmt.Errorf("etcd client: %w", err)
	}
	return &grower{cfg: cfg, client: client, etcd: etcd, closeFn: etcd.Close, ca: ca, manifest: string(manifest)}, nil
}

func (g *grower) close() {
	if g.closeFn != nil {
		_ = g.closeFn()
	}
}

// dial connects to etcd at endpoints with bootkube's client certificate.
func dial(cfg Config, endpoints []string) (*clientv3.Client, error) {
	return etcdmembers.Dial(endpoints, filepath.Join(cfg.EtcdPKIDir, etcdmembers.CACert), cfg.EtcdClientCert, cfg.EtcdClientKey)
}

// step makes at most one change and returns the masters once every one of
// them is a voting etcd member.
func (g *grower) step(ctx context.Context) ([]master, error) {
	masters, err := g.masters(ctx)
	if err != nil {
		return nil, err
	}
	if len(masters) < g.cfg.Masters {
		return nil, errNotYet(fmt.Sprintf("%d of %d masters registered", len(masters), g.cfg.Masters))
	}
	for _, m := range masters {
		p, err := etcdmembers.Join(ctx, g.etcd, m.Name, etcdmembers.PeerURL(m.IP), g.installer(m))
		if err != nil {
			return nil, err
		}
		if p.Step != etcdmembers.Voting {
			return nil, g.joining(ctx, m, p)
		}
	}
	return masters, nil
}

// installer puts m's etcd member on it through the installer pod.
func (g *grower) installer(m master) etcdmembers.PodInstaller {
	return etcdmembers.PodInstaller{Kube: g.client, CA: g.ca, Manifest: g.manifest, Image: g.cfg.InstallerImage, Node: m.Name, IP: m.IP, Validity: g.cfg.EtcdMemberValidity}
}

// joining says where the join of m's member stands (p): progress is an
// errNotYet, an unreadable membership the error that etcd gave. Once the
// member votes the installer's Secret goes (it holds private keys).
func (g *grower) joining(ctx context.Context, m master, p etcdmembers.Progress) error {
	switch p.Step {
	case etcdmembers.Unlisted:
		return p.Err
	case etcdmembers.WaitingForLearner:
		return errNotYet("waiting for learner " + p.Learner + " before adding " + m.Name)
	case etcdmembers.Added:
		g.cfg.Log.Infof("etcd member %s added as learner at %s", m.Name, etcdmembers.PeerURL(m.IP))
		return errNotYet("added " + m.Name)
	case etcdmembers.Reinstalled:
		return errNotYet("installing etcd member " + m.Name + " again")
	case etcdmembers.NotStarted:
		return errNotYet("etcd member " + m.Name + " has not started yet")
	case etcdmembers.NotReady:
		return errNotYet(fmt.Sprintf("etcd member %s is not ready to vote: %v", m.Name, p.Err))
	case etcdmembers.Promoted:
		g.cfg.Log.Infof("etcd member %s promoted to voter", m.Name)
		if err := etcdmembers.DeleteInstallerSecret(ctx, g.client, m.Name); err != nil {
			g.cfg.Log.Warnf("delete installer secret of %s: %v", m.Name, err)
		}
		return errNotYet("promoted " + m.Name)
	}
	return fmt.Errorf("etcd member %s: unknown join step %d", m.Name, p.Step)
}

// handOver waits for every master's API server, stops the bootstrap API
// server, removes the bootstrap member and records bootstrap-complete
// through a master's API server. After retireFirst the stop and the removal
// find nothing left to do.
func (g *grower) handOver(ctx context.Context, restCfg *rest.Config, masters []master) error {
	var clients []kubernetes.Interface
	for _, m := range masters {
		c, err := kubernetes.NewForConfig(directConfig(restCfg, m.IP))
		if err != nil {
			return err
		}
		if err := readyz(ctx, c.Discovery().RESTClient()); err != nil {
			return errNotYet(fmt.Sprintf("API server on %s not ready: %v", m.Name, err))
		}
		clients = append(clients, c)
	}
	g.cfg.Log.Infof("API servers on all %d masters ready", len(masters))
	if err := g.stopAPI(ctx, clients[0]); err != nil {
		return err
	}
	if err := g.removeBootstrapMember(ctx, masters); err != nil {
		return err
	}
	var last error
	for _, c := range clients {
		if last = markComplete(ctx, c); last == nil {
			g.stopEtcd()
			return nil
		}
	}
	return fmt.Errorf("record bootstrap-complete: %w", last)
}

// removeBootstrapMember hands etcd's leadership to a master and removes the
// bootstrap member, through the masters' members; a member already removed
// is left alone.
func (g *grower) removeBootstrapMember(ctx context.Context, masters []master) error {
	var endpoints []string
	for _, m := range masters {
		endpoints = append(endpoints, etcdmembers.ClientURL(m.IP))
	}
	mc, err := g.dialHandover(endpoints)
	if err != nil {
		return err
	}
	defer mc.Close()
	resp, err := mc.MemberList(ctx)
	if err != nil {
		return err
	}
	boot := etcdmembers.ByName(resp.Members, g.cfg.NodeName)
	if boot == nil {
		return nil
	}
	g.handLeadership(ctx, resp.Members, boot.ID)
	removed, err := etcdmembers.Remove(ctx, mc, g.cfg.NodeName, false)
	if err != nil {
		return err
	}
	if removed {
		g.cfg.Log.Info("bootstrap etcd member removed")
	}
	return nil
}

// localEtcd is the bootstrap member's own client URL.
const localEtcd = "https://127.0.0.1:2379"

// leaderMoveTimeout bounds the leadership hand-over before the bootstrap
// member is removed.
const leaderMoveTimeout = 10 * time.Second

// handLeadership makes a voting master etcd's leader when the bootstrap
// member (bootstrapID) leads: removing the leading member costs an election
// (several seconds on a loaded host) during which no API server can write,
// and bootstrap-complete is such a write. A failure is only logged: the
// removal works without it, as it did before.
func (g *grower) handLeadership(ctx context.Context, members []*etcdserverpb.Member, bootstrapID uint64) {
	to := etcdmembers.Transferee(members, bootstrapID)
	if to == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, leaderMoveTimeout)
	defer cancel()
	local, err := g.dialHandover([]string{localEtcd})
	if err == nil {
		var moved bool
		moved, err = etcdmembers.MoveLeader(ctx, local, localEtcd, to.ID)
		local.Close()
		if moved {
			g.cfg.Log.Infof("etcd leadership handed to %s", to.Name)
		}
	}
	if err != nil {
		g.cfg.Log.Warnf("cannot hand etcd leadership to %s before removing the bootstrap member (removing it anyway): %v", to.Name, err)
	}
}

// masters lists the registered masters with an address, sorted by name, and
// labels them with the control-plane role.
func (g *grower) masters(ctx context.Context) ([]master, error) {
	nodes, err := g.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: nodelayout.RoleLabel + "=master"})
	if err != nil {
		return nil, err
	}
	var out []master
	for i := range nodes.Items {
		n := &nodes.Items[i]
		ip := nodeIP(n)
		if ip == nil {
			continue
		}
		if _, ok := n.Labels[handover.ControlPlaneLabel]; !ok {
			patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]string{handover.ControlPlaneLabel: ""}}})
			if _, err := g.client.CoreV1().Nodes().Patch(ctx, n.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
				return nil, err
			}
		}
		out = append(out, master{Name: n.Name, IP: ip.String()})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// directConfig talks to one master's API server, verifying the serving
// certificate by its "kubernetes" name.
func directConfig(base *rest.Config, ip string) *rest.Config {
	c := rest.CopyConfig(base)
	c.Host = "https://" + net.JoinHostPort(ip, "6443")
	c.TLSClientConfig.ServerName = "kubernetes"
	return c
}

// isNotYet reports whether err is progress rather than failure.
func isNotYet(err error) bool {
	var n errNotYet
	return errors.As(err, &n)
}
