package bootkube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
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
	"github.com/kiln-project/kiln/cmd/internal/handover"
	"github.com/kiln-project/kiln/cmd/internal/node/etcdmember"
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
	etcd     clientv3.Cluster
	closeFn  func() error
	ca       *kilntls.CertKey
	manifest string
}

func newGrower(cfg Config, client kubernetes.Interface) (*grower, error) {
	ca, err := etcdmember.LoadCA(cfg.EtcdPKIDir)
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
	etcd, err := etcdmember.Client([]string{localEtcd},
		cfg.EtcdPKIDir+"/"+etcdmember.CACert, cfg.EtcdClientCert, cfg.EtcdClientKey)
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
	resp, err := g.etcd.MemberList(ctx)
	if err != nil {
		return nil, err
	}
	for _, m := range masters {
		member := etcdmember.ByPeerURL(resp.Members, etcdmember.PeerURL(m.IP))
		switch {
		case member == nil:
			if l := etcdmember.Learner(resp.Members); l != nil {
				return nil, errNotYet("waiting for learner " + l.Name + " before adding " + m.Name)
			}
			return nil, g.add(ctx, m)
		case member.IsLearner && member.Name == "":
			return nil, errNotYet("etcd member " + m.Name + " has not started yet")
		case member.IsLearner:
			if _, err := g.etcd.MemberPromote(ctx, member.ID); err != nil {
				return nil, errNotYet(fmt.Sprintf("etcd member %s is not ready to vote: %v", m.Name, err))
			}
			g.cfg.Log.Infof("etcd member %s promoted to voter", m.Name)
			g.cleanupInstaller(ctx, m)
			return nil, errNotYet("promoted " + m.Name)
		}
	}
	return masters, nil
}

// add issues the member's certificates, adds it as a learner and has the
// installer pod put its etcd static pod on the master.
func (g *grower) add(ctx context.Context, m master) error {
	member, err := etcdmember.Issue(ctx, g.ca, m.Name, net.ParseIP(m.IP))
	if err != nil {
		return err
	}
	resp, err := g.etcd.MemberAddAsLearner(ctx, []string{etcdmember.PeerURL(m.IP)})
	if err != nil {
		return fmt.Errorf("add etcd member %s: %w", m.Name, err)
	}
	manifest := strings.ReplaceAll(g.manifest, manifests.EtcdInitialClusterMarker, InitialCluster(resp.Members, resp.Member.ID, m.Name))
	files := etcdmember.Files(g.ca.Cert, member)
	files["etcd.yaml"] = []byte(manifest)
	if err := g.install(ctx, m, files); err != nil {
		return err
	}
	g.cfg.Log.Infof("etcd member %s added as learner at %s", m.Name, etcdmember.PeerURL(m.IP))
	return errNotYet("added " + m.Name)
}

// handOver waits for every master's API server, stops the bootstrap API
// server, removes the bootstrap member and records bootstrap-complete
// through a master's API server.
func (g *grower) handOver(ctx context.Context, restCfg *rest.Config, masters []master) error {
	var clients []kubernetes.Interface
	var endpoints []string
	for _, m := range masters {
		c, err := kubernetes.NewForConfig(directConfig(restCfg, m.IP))
		if err != nil {
			return err
		}
		if err := readyz(ctx, c.Discovery().RESTClient()); err != nil {
			return errNotYet(fmt.Sprintf("API server on %s not ready: %v", m.Name, err))
		}
		clients = append(clients, c)
		endpoints = append(endpoints, "https://"+net.JoinHostPort(m.IP, "2379"))
	}
	g.cfg.Log.Infof("API servers on all %d masters ready", len(masters))
	if err := g.stopAPI(ctx, clients[0]); err != nil {
		return err
	}
	mc, err := etcdmember.Client(endpoints, g.cfg.EtcdPKIDir+"/"+etcdmember.CACert, g.cfg.EtcdClientCert, g.cfg.EtcdClientKey)
	if err != nil {
		return err
	}
	defer mc.Close()
	resp, err := mc.MemberList(ctx)
	if err != nil {
		return err
	}
	for _, mem := range resp.Members {
		if mem.Name == g.cfg.NodeName {
			g.handLeadership(ctx, resp.Members, mem.ID)
			if _, err := mc.MemberRemove(ctx, mem.ID); err != nil {
				return fmt.Errorf("remove bootstrap etcd member: %w", err)
			}
			g.cfg.Log.Info("bootstrap etcd member removed")
		}
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
	to := transferee(members, bootstrapID)
	if to == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, leaderMoveTimeout)
	defer cancel()
	local, err := etcdmember.Client([]string{localEtcd}, g.cfg.EtcdPKIDir+"/"+etcdmember.CACert, g.cfg.EtcdClientCert, g.cfg.EtcdClientKey)
	if err == nil {
		var moved bool
		moved, err = moveLeader(ctx, local, localEtcd, to.ID)
		local.Close()
		if moved {
			g.cfg.Log.Infof("etcd leadership handed to %s", to.Name)
		}
	}
	if err != nil {
		g.cfg.Log.Warnf("cannot hand etcd leadership to %s before removing the bootstrap member (removing it anyway): %v", to.Name, err)
	}
}

// transferee is the voting member other than bootstrapID with the lowest
// ID, or nil.
func transferee(members []*etcdserverpb.Member, bootstrapID uint64) *etcdserverpb.Member {
	var to *etcdserverpb.Member
	for _, m := range members {
		if m.ID != bootstrapID && !m.IsLearner && (to == nil || m.ID < to.ID) {
			to = m
		}
	}
	return to
}

// leaderMover is the part of an etcd client that moves leadership.
type leaderMover interface {
	Status(ctx context.Context, endpoint string) (*clientv3.StatusResponse, error)
	MoveLeader(ctx context.Context, transfereeID uint64) (*clientv3.MoveLeaderResponse, error)
}

// moveLeader asks the member at endpoint, when it leads, to hand its
// leadership to the member with ID to; it reports whether it did.
func moveLeader(ctx context.Context, c leaderMover, endpoint string, to uint64) (bool, error) {
	st, err := c.Status(ctx, endpoint)
	if err != nil {
		return false, err
	}
	if st.Header == nil || st.Leader != st.Header.MemberId {
		return false, nil
	}
	if _, err := c.MoveLeader(ctx, to); err != nil {
		return false, err
	}
	return true, nil
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

// InitialCluster is the --initial-cluster value for the member with ID
// newID and name newName joining members.
func InitialCluster(members []*etcdserverpb.Member, newID uint64, newName string) string {
	var parts []string
	for _, m := range members {
		name := m.Name
		if m.ID == newID {
			name = newName
		}
		for _, u := range m.PeerURLs {
			parts = append(parts, name+"="+u)
		}
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
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
