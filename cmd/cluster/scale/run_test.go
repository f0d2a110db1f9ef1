package scale

import (
	"context"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kiln-project/kiln/assets/installconfig/types"
	"github.com/kiln-project/kiln/assets/installconfig/types/machines"
	"github.com/kiln-project/kiln/assets/manifests"
	"github.com/kiln-project/kiln/assets/release"
	"github.com/kiln-project/kiln/assets/tls/tlstest"
	"github.com/kiln-project/kiln/cmd/cluster/etcdmembers"
	"github.com/kiln-project/kiln/cmd/cluster/machineset"
	"github.com/kiln-project/kiln/ignition"
	"github.com/kiln-project/kiln/ignition/nodelayout"
	"github.com/kiln-project/kiln/platforms"
)

// journal records every call of the fakes, in order.
type journal struct {
	mu    sync.Mutex
	calls []string
}

func (j *journal) add(format string, args ...any) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.calls = append(j.calls, strings.ReplaceAll(fmt.Sprintf(format, args...), infra+"-", ""))
}

// fakeScaler is a platform whose machines register their Node (Ready, at
// the address the plan gives) as soon as they are applied.
type fakeScaler struct {
	j        *journal
	kube     *fake.Clientset
	backends []string
	// unregistered: new machines never register their Node; notReady:
	// they register it, never Ready (no pod network).
	unregistered, notReady bool
	// kubelet is the version the Nodes of new machines report; the
	// default release's when "".
	kubelet string
	// joins are the join tokens the full configs of created machines
	// carried, each checked against the cluster's token Secrets; fulls
	// those configs.
	joins []string
	fulls [][]byte
	t     *testing.T
}

func (f *fakeScaler) ApplyMachines(ctx context.Context, c *platforms.Cluster) error {
	f.j.add("machines %s", strings.Join(c.Machines().All(), ","))
	for role, full := range c.Full {
		tok := configToken(f.t, full)
		f.joins = append(f.joins, tok)
		f.fulls = append(f.fulls, full)
		id, _, _ := strings.Cut(tok, ".")
		s, err := f.kube.CoreV1().Secrets("kube-system").Get(ctx, "bootstrap-token-"+id, metav1.GetOptions{})
		if err != nil || s.Labels[JoinLabel] == "" || string(s.Data["token-id"])+"."+string(s.Data["token-secret"]) != tok {
			f.t.Errorf("a %s joins with a token the cluster does not hold: %v", role, err)
		}
	}
	for _, n := range c.Machines().All() {
		if _, err := f.kube.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{}); err == nil || f.unregistered {
			continue
		}
		node := readyNode(n, ipOf(n))
		if v := c.ReleaseOf(n); v != "" {
			// The machine boots the release the cluster gives it.
			node.Status.NodeInfo.KubeletVersion = v
		}
		if f.kubelet != "" {
			node.Status.NodeInfo.KubeletVersion = f.kubelet
		}
		if f.notReady {
			node.Status.Conditions[0] = corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Message: "cni plugin not initialized"}
		}
		_, _ = f.kube.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	}
	return nil
}

// fullConfig is a role's full config with the install-time token in its
// kubelet bootstrap kubeconfig.
func fullConfig(t *testing.T) []byte {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["c"] = &clientcmdapi.Cluster{Server: "https://api-int.demo.example.com:6443"}
	kc.AuthInfos["kubelet-bootstrap"] = &clientcmdapi.AuthInfo{Token: "abcdef.0123456789abcdef"}
	kc.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "kubelet-bootstrap"}
	kc.CurrentContext = "c"
	data, err := clientcmd.Write(*kc)
	if err != nil {
		t.Fatal(err)
	}
	cfg := ignition.New()
	ignition.AddFile(&cfg, nodelayout.BootstrapKubeconfig, 0o600, data)
	raw, err := ignition.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// configToken returns the token of a full config's kubelet bootstrap kubeconfig.
func configToken(t *testing.T, full []byte) string {
	t.Helper()
	cfg, err := ignition.Parse(full)
	if err != nil {
		t.Fatal(err)
	}
	raw, _, err := ignition.FileContents(cfg, nodelayout.BootstrapKubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	kc, err := clientcmd.Load(raw)
	if err != nil {
		t.Fatal(err)
	}
	return kc.AuthInfos["kubelet-bootstrap"].Token
}

// joinSecrets returns the names of the join token Secrets left.
func joinSecrets(t *testing.T, r *Runner) []string {
	t.Helper()
	list, err := r.Kube.CoreV1().Secrets("kube-system").List(context.Background(), metav1.ListOptions{LabelSelector: JoinLabel})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range list.Items {
		names = append(names, s.Name)
	}
	return names
}

func (f *fakeScaler) SetAPIBackends(_ context.Context, _ *platforms.Cluster, masters []string) error {
	f.j.add("lb %s", strings.Join(masters, ","))
	f.backends = masters
	return nil
}

func (f *fakeScaler) APIBackends(context.Context, *platforms.Cluster) ([]string, error) {
	return f.backends, nil
}

// ipOf is the address the fake platform gives a machine: 10.0.0.1<i> for
// master i, 10.0.0.2<i> for worker i.
func ipOf(name string) string {
	role, i, _ := machines.Index(infra, name)
	if role == machines.RoleMaster {
		return fmt.Sprintf("10.0.0.1%d", i)
	}
	return fmt.Sprintf("10.0.0.2%d", i)
}

func readyNode(name, ip string) *corev1.Node {
	role := "worker"
	if strings.Contains(name, "-master-") {
		role = "master"
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{nodelayout.RoleLabel: role}},
		Status: corev1.NodeStatus{
			Addresses:  []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
			NodeInfo:   corev1.NodeSystemInfo{KubeletVersion: release.Default().Kubernetes},
		},
	}
}

// fakeEtcd is a cluster of members; a learner starts (gets its name) at
// the first list after its add, as the installer would start it.
type fakeEtcd struct {
	j       *journal
	members []*etcdserverpb.Member
	names   map[string]string // peer URL -> node name, for learners that start
	nextID  uint64
	down    map[string]bool // client URL -> its member does not answer
}

func (e *fakeEtcd) MemberList(context.Context, ...clientv3.OpOption) (*clientv3.MemberListResponse, error) {
	for _, m := range e.members {
		if m.Name == "" {
			m.Name = e.names[m.PeerURLs[0]]
			m.ClientURLs = []string{strings.Replace(m.PeerURLs[0], ":2380", ":2379", 1)}
		}
	}
	return &clientv3.MemberListResponse{Members: e.members}, nil
}

func (e *fakeEtcd) MemberAddAsLearner(_ context.Context, peers []string) (*clientv3.MemberAddResponse, error) {
	e.nextID++
	m := &etcdserverpb.Member{ID: e.nextID, PeerURLs: peers, IsLearner: true}
	e.members = append(e.members, m)
	e.j.add("etcd add learner %s", peers[0])
	return &clientv3.MemberAddResponse{Member: m, Members: e.members}, nil
}

func (e *fakeEtcd) MemberPromote(_ context.Context, id uint64) (*clientv3.MemberPromoteResponse, error) {
	for _, m := range e.members {
		if m.ID == id {
			m.IsLearner = false
			e.j.add("etcd promote %s", m.Name)
		}
	}
	return &clientv3.MemberPromoteResponse{}, nil
}

func (e *fakeEtcd) MemberRemove(_ context.Context, id uint64) (*clientv3.MemberRemoveResponse, error) {
	for i, m := range e.members {
		if m.ID == id {
			e.j.add("etcd remove %s", m.Name)
			e.members = append(e.members[:i], e.members[i+1:]...)
			break
		}
	}
	return &clientv3.MemberRemoveResponse{}, nil
}

func (e *fakeEtcd) Status(_ context.Context, endpoint string) (*clientv3.StatusResponse, error) {
	if e.down[endpoint] {
		return nil, errors.New("connection refused")
	}
	return &clientv3.StatusResponse{}, nil
}

func (e *fakeEtcd) Close() error { return nil }

// newTestRunner returns a runner on a cluster of masters 0..m-1 and
// workers 0..w-1, all Nodes Ready and every master a voter.
func newTestRunner(t *testing.T, m, w int) (*Runner, *journal, *fakeEtcd) {
	t.Helper()
	j := &journal{}
	kube := fake.NewClientset()
	shape := machines.DefaultShape(infra, m, w)
	e := &fakeEtcd{j: j, names: map[string]string{}}
	for i, n := range shape.All() {
		ip := ipOf(n)
		if _, err := kube.CoreV1().Nodes().Create(context.Background(), readyNode(n, ip), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if i < m {
			e.nextID++
			e.members = append(e.members, &etcdserverpb.Member{ID: e.nextID, Name: n, PeerURLs: []string{etcdmembers.PeerURL(ip)}, ClientURLs: []string{"https://" + ip + ":2379"}})
		}
	}
	log := logrus.New()
	log.SetOutput(io.Discard)
	r := &Runner{
		Cluster: &platforms.Cluster{Dir: t.TempDir(), InfraID: infra, Config: &types.Config{}, Shape: shape},
		Kube:    kube,
		Etcd: func([]string) (Etcd, error) {
			return e, nil
		},
		PKI:      EtcdPKI{CA: tlstest.CA(t), Manifest: manifestOf(release.Etcd, release.Default().Image(release.Etcd)) + "    - --data-dir=/var/lib/etcd\n# initial: " + manifests.EtcdInitialClusterMarker},
		Configs:  map[string][]byte{machines.RoleMaster: fullConfig(t), machines.RoleWorker: fullConfig(t)},
		APIReady: func(_ context.Context, ip string) error { j.add("readyz %s", ip); return nil },
		Drain:    func(_ context.Context, n string) error { j.add("drain %s", n); return nil },
		Poll:     time.Millisecond,
		Log:      log,
		Progress: platforms.NoProgress{},
		Out:      io.Discard,
	}
	r.Machines = &fakeScaler{j: j, kube: kube, backends: shape.Masters, t: t}
	return r, j, e
}

// TestRunOrder checks the order of the steps of each action, which is
// what keeps etcd and the API available: a master joins etcd (learner,
// then voter) before it goes behind the load balancer, and leaves etcd
// before anything else of it goes; a worker is drained before its Node
// and machine go.
func TestRunOrder(t *testing.T) {
	r, j, e := newTestRunner(t, 1, 1)
	e.names[etcdmembers.PeerURL("10.0.0.11")] = infra + "-master-1"
	p, err := MakePlan(infra, r.Cluster.Shape, Request{Masters: 3, Workers: 1, Remove: ws(0)}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.names[etcdmembers.PeerURL("10.0.0.12")] = infra + "-master-2"
	if err := r.Run(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"machines master-0,master-1,worker-0",
		"etcd add learner https://10.0.0.11:2380",
		"etcd promote master-1",
		"readyz 10.0.0.11",
		"lb master-0,master-1",
		"machines master-0,master-1,master-2,worker-0",
		"etcd add learner https://10.0.0.12:2380",
		"etcd promote master-2",
		"readyz 10.0.0.12",
		"lb master-0,master-1,master-2",
		"machines master-0,master-1,master-2,worker-0,worker-1",
		"drain worker-0",
		"machines master-0,master-1,master-2,worker-1",
	}
	if !reflect.DeepEqual(j.calls, want) {
		t.Errorf("calls:\n%s\nwant:\n%s", strings.Join(j.calls, "\n"), strings.Join(want, "\n"))
	}
	// The installer Secrets (member keys) and the join token are gone.
	if s, _ := r.Kube.CoreV1().Secrets("kiln-system").List(context.Background(), metav1.ListOptions{}); len(s.Items) != 0 {
		t.Errorf("installer Secrets left: %d", len(s.Items))
	}
	if left := joinSecrets(t, r); len(left) != 0 {
		t.Errorf("join tokens left after the joins: %v", left)
	}
	// Each machine joined with a token of its own, never the install-time one.
	joins := r.Machines.(*fakeScaler).joins
	if len(joins) != 3 || joins[0] == joins[1] || joins[1] == joins[2] || slices.Contains(joins, "abcdef.0123456789abcdef") {
		t.Errorf("join tokens = %q, want 3 new and different ones", joins)
	}
	if _, err := r.Kube.CoreV1().Nodes().Get(context.Background(), infra+"-worker-0", metav1.GetOptions{}); err == nil {
		t.Error("the removed worker's Node is still there")
	}
	rec, _, err := machineset.LoadShape(r.Cluster.Dir)
	if err != nil || len(rec.Removing) != 0 || len(rec.Joining) != 0 || !reflect.DeepEqual(rec.Masters, ms(0, 1, 2)) || !reflect.DeepEqual(rec.Workers, ws(1)) {
		t.Errorf("shape record = %+v, %v", rec, err)
	}
}

// TestRunAddMasterEndsReady: a master's join ends once its Node is Ready,
// as a worker's does, not when its API server serves: the next command (an
// upgrade's health check) relies on it.
func TestRunAddMasterEndsReady(t *testing.T) {
	r, j, e := newTestRunner(t, 1, 0)
	e.names[etcdmembers.PeerURL("10.0.0.11")] = infra + "-master-1"
	r.Machines.(*fakeScaler).notReady = true
	r.JoinTimeout = time.Second
	p, err := MakePlan(infra, r.Cluster.Shape, Request{Masters: 3, Workers: 0}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = r.Run(context.Background(), p)
	if err == nil || !strings.Contains(err.Error(), "Waiting for Node "+infra+"-master-1 to be Ready") || !strings.Contains(err.Error(), "cni plugin not initialized") {
		t.Fatalf("want the join to wait for the Node Ready, naming why not: %v", err)
	}
	if !slices.Contains(j.calls, "lb master-0,master-1") {
		t.Errorf("the master serves behind the load balancer before its Node is Ready: %q", j.calls)
	}
}

// TestRunAddBootsTheRunningRelease: in a cluster upgraded since it was
// created, masters and workers added boot straight into the release the
// cluster runs: the platform is told their release before it creates
// them (their Nodes register at it), the record keeps it, the masters'
// configs stage that release's control plane and their etcd member runs
// its etcd. In a cluster not upgraded, nothing is recorded.
func TestRunAddBootsTheRunningRelease(t *testing.T) {
	older, newer := previousMinor(t), release.Default()
	for _, upgraded := range []bool{true, false} {
		t.Run(fmt.Sprintf("upgraded=%v", upgraded), func(t *testing.T) {
			at := older
			if upgraded {
				at = newer
			}
			r, _, e := newTestRunner(t, 1, 1)
			r.Cluster.Resolved.Release = older
			setRunning(t, r, at)
			e.names[etcdmembers.PeerURL("10.0.0.11")] = infra + "-master-1"
			e.names[etcdmembers.PeerURL("10.0.0.12")] = infra + "-master-2"
			r.Configs[machines.RoleMaster] = withFile(t, r.Configs[machines.RoleMaster],
				nodelayout.StagedPodDir+"/kube-apiserver.yaml", manifestOf(release.KubeAPIServer, older.Image(release.KubeAPIServer)))
			r.PKI.Manifest = manifestOf(release.Etcd, older.Image(release.Etcd)) + "    - --data-dir=/var/lib/etcd\n# " + manifests.EtcdInitialClusterMarker
			p, err := MakePlan(infra, r.Cluster.Shape, Request{Masters: 3, Workers: 2}, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := r.Run(context.Background(), p); err != nil {
				t.Fatal(err)
			}
			rec, _, err := machineset.LoadShape(r.Cluster.Dir)
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]string(nil)
			if upgraded {
				want = map[string]string{infra + "-master-1": newer.Kubernetes, infra + "-master-2": newer.Kubernetes, infra + "-worker-1": newer.Kubernetes}
			}
			if !reflect.DeepEqual(rec.Releases, want) {
				t.Errorf("recorded releases %v, want %v", rec.Releases, want)
			}
			for _, n := range []string{"master-1", "master-2", "worker-1"} {
				node, err := r.Kube.CoreV1().Nodes().Get(context.Background(), infra+"-"+n, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if got := node.Status.NodeInfo.KubeletVersion; got != at.Kubernetes {
					t.Errorf("%s registered at %s, want %s", n, got, at.Kubernetes)
				}
			}
			fulls := r.Machines.(*fakeScaler).fulls
			for _, full := range fulls[:2] { // the masters'
				cfg, err := ignition.Parse(full)
				if err != nil {
					t.Fatal(err)
				}
				pod, _, err := ignition.FileContents(cfg, nodelayout.StagedPodDir+"/kube-apiserver.yaml")
				if err != nil || !strings.Contains(string(pod), at.Image(release.KubeAPIServer)+"\n") {
					t.Errorf("staged kube-apiserver = %q, %v; want %s", pod, err, at.Image(release.KubeAPIServer))
				}
			}
			if !strings.Contains(r.PKI.Manifest, at.Image(release.Etcd)+"\n") || !strings.Contains(r.PKI.Manifest, "--snapshot-count=") {
				t.Errorf("etcd static pod of the new members:\n%s\nwant %s, with --snapshot-count", r.PKI.Manifest, at.Image(release.Etcd))
			}
		})
	}
}

// TestRunRemoveMasterOrder checks a master's removal: out of the load
// balancer, out of etcd, then its machine; and that a replacement adds a
// machine of the same name back as a new learner.
func TestRunRemoveMasterOrder(t *testing.T) {
	r, j, e := newTestRunner(t, 3, 0)
	e.names[etcdmembers.PeerURL("10.0.0.11")] = infra + "-master-1"
	p, err := MakePlan(infra, r.Cluster.Shape, Request{Masters: 1, Replace: ms(1)}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Run(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"lb master-0,master-2",
		"etcd remove master-1",
		"machines master-0,master-2",
		"machines master-0,master-1,master-2",
		"etcd add learner https://10.0.0.11:2380",
		"etcd promote master-1",
		"readyz 10.0.0.11",
		"lb master-0,master-1,master-2",
		"lb master-0,master-1",
		"etcd remove master-2",
		"machines master-0,master-1",
		// The replaced master is kept when the count shrinks.
		"lb master-1",
		"etcd remove master-0",
		"machines master-1",
	}
	if !reflect.DeepEqual(j.calls, want) {
		t.Errorf("calls:\n%s\nwant:\n%s", strings.Join(j.calls, "\n"), strings.Join(want, "\n"))
	}
}

// TestRunRemoveMasterQuorum: a master's removal that would leave etcd
// without a majority that answers is refused, naming the member that does
// not answer, after the load balancer change and before anything else of
// the master goes; --force goes ahead.
func TestRunRemoveMasterQuorum(t *testing.T) {
	r, j, e := newTestRunner(t, 3, 0)
	e.down = map[string]bool{e.members[2].ClientURLs[0]: true} // master-2
	p, err := MakePlan(infra, r.Cluster.Shape, Request{Masters: 1, Remove: ms(1)}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = r.Run(context.Background(), p)
	var qe *etcdmembers.QuorumError
	if !errors.As(err, &qe) || !reflect.DeepEqual(qe.Down, ms(2)) || qe.Leaving != infra+"-master-1" {
		t.Fatalf("Run = %v; want a quorum refusal naming master-2", err)
	}
	if want := []string{"lb master-0,master-2"}; !reflect.DeepEqual(j.calls, want) {
		t.Errorf("calls %q, want %q", j.calls, want)
	}
	r.Force = true
	if err := r.Run(context.Background(), p); err != nil {
		t.Fatalf("Run with --force: %v", err)
	}
	if !slices.Contains(j.calls, "etcd remove master-1") {
		t.Errorf("calls %q: master-1's member was not removed with --force", j.calls)
	}
}

// TestUnjoined checks that a master whose join a previous run did not
// finish (a learner, no member, or not behind the load balancer) is
// found, and a joined one is not.
func TestUnjoined(t *testing.T) {
	r, _, e := newTestRunner(t, 3, 0)
	r.Machines.(*fakeScaler).backends = ms(0, 1) // master-2 is not behind the balancer
	e.members[1].IsLearner = true                // master-1 is still a learner
	shape := machines.Shape{Masters: ms(0, 1, 2, 3)}
	got, err := r.Unjoined(context.Background(), shape)
	if err != nil {
		t.Fatal(err)
	}
	if want := ms(1, 2, 3); !reflect.DeepEqual(got, want) {
		t.Errorf("Unjoined = %q, want %q", got, want)
	}
}

// A join that fails deletes its token; the record keeps it, so that the
// re-run makes the same token valid again for the machine already created
// with it, and the token goes once that machine's Node registered.
func TestJoinTokenOfAFailedJoin(t *testing.T) {
	r, _, _ := newTestRunner(t, 1, 0)
	f := r.Machines.(*fakeScaler)
	f.unregistered = true
	r.JoinTimeout = 50 * time.Millisecond
	p, err := MakePlan(infra, r.Cluster.Shape, Request{Masters: 1, Workers: 1}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Run(context.Background(), p); err == nil {
		t.Fatal("a join whose Node never registered succeeded")
	}
	if left := joinSecrets(t, r); len(left) != 0 {
		t.Errorf("join tokens left after a failed join: %v", left)
	}
	rec, _, err := machineset.LoadShape(r.Cluster.Dir)
	worker := infra + "-worker-0"
	if err != nil || rec.Joining[worker] != f.joins[0] {
		t.Fatalf("shape record = %+v, %v: want the failed join's token kept", rec, err)
	}
	// The re-run (a new process: the runner reads the record).
	f.unregistered = false
	r.Joining = rec.Joining
	r.Cluster.Shape = rec.Shape
	p, err = MakePlan(infra, rec.Shape, Request{Masters: 1, Workers: 1}, nil, []string{worker})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Run(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	if len(f.joins) < 2 || f.joins[len(f.joins)-1] != f.joins[0] {
		t.Errorf("join tokens = %q: the re-run must present the token the machine was created with", f.joins)
	}
	if left := joinSecrets(t, r); len(left) != 0 {
		t.Errorf("join tokens left after the join: %v", left)
	}
	if rec, _, _ := machineset.LoadShape(r.Cluster.Dir); len(rec.Joining) != 0 {
		t.Errorf("shape record keeps join tokens after the join: %v", rec.Joining)
	}
}

// progressLog records what a wait showed: each step's detail lines and
// its result.
type progressLog struct {
	mu      sync.Mutex
	updates []string
	ends    []error
}

func (p *progressLog) Start(string) func(error) {
	return func(err error) {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.ends = append(p.ends, err)
	}
}

func (p *progressLog) Update(detail string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.updates = append(p.updates, detail)
}

// TestUntil checks the wait of every scale step: done ends it, a check's
// error is returned as it is, and the timeout is an error of its own, after
// each new state was shown once.
func TestUntil(t *testing.T) {
	errBroken := errors.New("broken")
	for _, tc := range []struct {
		name    string
		results []string // a state per call; "done" and "fail" end it
		wantErr func(error) bool
		shown   []string
	}{
		{name: "done at once", results: []string{"done"}, wantErr: func(err error) bool { return err == nil }},
		{name: "done later", results: []string{"a", "a", "b", "done"}, wantErr: func(err error) bool { return err == nil }, shown: []string{"a", "b"}},
		{name: "check fails", results: []string{"a", "fail"}, wantErr: func(err error) bool { return errors.Is(err, errBroken) }, shown: []string{"a"}},
		{name: "timeout", results: []string{"a", "b"}, wantErr: func(err error) bool { return err != nil && !errors.Is(err, errBroken) }, shown: []string{"a", "b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &progressLog{}
			r := &Runner{Poll: time.Millisecond, Log: logrus.New(), Progress: p}
			calls := 0
			err := r.until(context.Background(), 200*time.Millisecond, "waiting", func(context.Context) (bool, string, error) {
				state := tc.results[min(calls, len(tc.results)-1)]
				calls++
				switch state {
				case "done":
					return true, "", nil
				case "fail":
					return false, "", errBroken
				}
				return false, state, nil
			})
			if !tc.wantErr(err) {
				t.Errorf("until = %v", err)
			}
			if !reflect.DeepEqual(p.updates, tc.shown) {
				t.Errorf("shown %q, want %q", p.updates, tc.shown)
			}
			if len(p.ends) != 1 || p.ends[0] != err {
				t.Errorf("the step ended with %v, want once with %v", p.ends, err)
			}
		})
	}
}
