package install

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kiln-project/kiln/assets/installconfig/types"
	"github.com/kiln-project/kiln/assets/installconfig/types/machines"
	"github.com/kiln-project/kiln/assets/installconfig/types/ssh"
	"github.com/kiln-project/kiln/cmd/cluster/exitcode"
	"github.com/kiln-project/kiln/cmd/cluster/waitfor"
	"github.com/kiln-project/kiln/platforms"
)

// fakeCluster is a cluster API that a fake provisioner brings up: Provision
// registers ready nodes and the add-ons, and writes bootstrap-complete.
type fakeCluster struct {
	client *fake.Clientset
	nodes  int
	// stuck keeps bootstrap from completing.
	stuck bool
}

func (f *fakeCluster) bootstrapComplete(ctx context.Context) {
	f.client.CoreV1().ConfigMaps("kube-system").Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "bootstrap"}, Data: map[string]string{"status": "complete"},
	}, metav1.CreateOptions{})
}

func (f *fakeCluster) up(ctx context.Context) {
	for i := 0; i < f.nodes; i++ {
		f.client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node-%d", i)},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}},
			metav1.CreateOptions{})
		f.client.CoordinationV1().Leases("kube-node-lease").Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node-%d", i)},
			Spec:       coordinationv1.LeaseSpec{RenewTime: &metav1.MicroTime{Time: time.Now()}}}, metav1.CreateOptions{})
	}
	f.client.AppsV1().DaemonSets("kube-system").Create(ctx, &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "kube-proxy"},
		Status:     appsv1.DaemonSetStatus{NumberReady: int32(f.nodes), DesiredNumberScheduled: int32(f.nodes)},
	}, metav1.CreateOptions{})
	f.client.AppsV1().Deployments("kube-system").Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "coredns"},
		Status: appsv1.DeploymentStatus{AvailableReplicas: 1, Conditions: []appsv1.DeploymentCondition{
			{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue}}},
	}, metav1.CreateOptions{})
	if !f.stuck {
		f.bootstrapComplete(ctx)
	}
}

// recordingProv is a fake provisioner that records its calls, with whether
// the cluster was resumed after bootstrap-complete, and fails where told.
type recordingProv struct {
	cluster *fakeCluster
	calls   []string
	fail    map[string]error
	// shapes are the machines of each Provision call.
	shapes []machines.Shape
}

func (p *recordingProv) record(name string, c *platforms.Cluster) error {
	if c != nil && c.BootstrapDone {
		name += "(bootstrap done)"
	}
	p.calls = append(p.calls, name)
	return p.fail[strings.SplitN(name, "(", 2)[0]]
}

func (p *recordingProv) Preflight(_ context.Context, c *platforms.Cluster) error {
	return p.record("preflight", c)
}

func (p *recordingProv) Provision(ctx context.Context, c *platforms.Cluster) error {
	p.shapes = append(p.shapes, c.Machines())
	if err := p.record("provision", c); err != nil {
		return err
	}
	p.cluster.up(ctx)
	return nil
}

func (p *recordingProv) DestroyBootstrap(_ context.Context, c *platforms.Cluster) error {
	return p.record("destroy-bootstrap", c)
}

func (p *recordingProv) Destroy(context.Context, string, string) error {
	return p.record("destroy", nil)
}

// fakeAPI waits on a fake clientset; the fake has no /readyz, so the API
// answers at once.
type fakeAPI struct {
	*waitfor.Waiter
	apiCalls int
	apiErr   error
}

func (f *fakeAPI) API(context.Context, string, time.Duration) (string, error) {
	f.apiCalls++
	return "v1.0.0", f.apiErr
}

// setup returns a fresh 1-master, 1-worker cluster whose Ignition configs
// are new, with its fake provisioner and API.
func setup(t *testing.T) (*Cluster, *recordingProv, *fakeAPI, *bytes.Buffer) {
	t.Helper()
	var logs bytes.Buffer
	log := logrus.New()
	log.SetOutput(&logs)
	log.SetLevel(logrus.DebugLevel)
	one := int64(1)
	c := &Cluster{
		Cluster: platforms.Cluster{Dir: t.TempDir(), InfraID: "demo-x7k2p", Config: &types.Config{
			ControlPlane: &types.MachinePool{Replicas: &one},
			Compute:      []types.MachinePool{{Replicas: &one}},
		}},
		Kubeconfig:  "/dir/auth/kubeconfig",
		TokenExpiry: time.Now().Add(24 * time.Hour),
		TokenSecret: "bootstrap-token-abcdef",
		Timeouts:    Timeouts{API: time.Second, Bootstrap: 2 * time.Second, Install: 2 * time.Second},
	}
	fc := &fakeCluster{client: fake.NewClientset(), nodes: c.Nodes()}
	api := &fakeAPI{Waiter: &waitfor.Waiter{Client: fc.client, Log: log, Progress: platforms.NoProgress{}, Poll: time.Millisecond}}
	return c, &recordingProv{cluster: fc}, api, &logs
}

func create(c *Cluster, prov platforms.Provisioner, api *fakeAPI, log io.Writer) (string, error) {
	l := logrus.New()
	l.SetOutput(log)
	l.SetLevel(logrus.DebugLevel)
	var out bytes.Buffer
	err := Create(context.Background(), c, prov, API{Waits: api, Server: "https://api.demo.example.com:6443", Client: api.Client}, l, &out)
	return out.String(), err
}

// phasesRun lists the phases in the debug log, skipped ones marked.
func phasesRun(logs string) []string {
	var out []string
	for _, line := range strings.Split(logs, "\n") {
		if _, after, ok := strings.Cut(line, "phase: "); ok {
			out = append(out, strings.TrimSuffix(after, `"`))
		}
	}
	return out
}

func TestCreateRunsEveryPhaseInOrder(t *testing.T) {
	c, prov, api, logs := setup(t)
	out, err := create(c, prov, api, logs)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"preflight", "provision", "destroy-bootstrap"}; !slices.Equal(prov.calls, want) {
		t.Errorf("provisioner calls = %q, want %q", prov.calls, want)
	}
	want := []string{
		"check the bootstrap credentials", "preflight", "provision", "wait for the API",
		"wait for bootstrap-complete", "destroy the bootstrap machine",
		"create the workers held back during bootstrap: skipped", // Standard hardware
		"wait for install-complete",
		"check the pod network: skipped", // the fake provisioner is no waitfor.Prober
		"retire the install-time join token",
	}
	if got := phasesRun(logs.String()); !slices.Equal(got, want) {
		t.Errorf("phases =\n%q\nwant\n%q", got, want)
	}
	if api.apiCalls != 1 {
		t.Errorf("API waited %d times, want 1", api.apiCalls)
	}
	for _, s := range []string{"Install complete!", "export KUBECONFIG=/dir/auth/kubeconfig", "there is no password"} {
		if !strings.Contains(out, s) {
			t.Errorf("summary lacks %q:\n%s", s, out)
		}
	}
	// kiln makes no kubeadmin password: nothing would accept it.
	if strings.Contains(out, "kubeadmin") {
		t.Errorf("summary names a kubeadmin credential:\n%s", out)
	}
}

// With controlPlaneHardwareSpeed Slower the first provision creates the
// masters only, and the workers come once the bootstrap machine is
// destroyed; a create resumed after bootstrap-complete creates every
// machine at once, and Standard never holds workers. A bootstrap host
// that joins as a worker (platform ssh) has provision run again once the
// bootstrap machine is gone, with every machine both times (the ssh
// provisioner leaves that host out of the workers until then).
func TestSlowerHoldsWorkersUntilBootstrapIsGone(t *testing.T) {
	masters := []string{"demo-x7k2p-master-0"}
	all := machines.Shape{Masters: masters, Workers: []string{"demo-x7k2p-worker-0"}}
	for _, tc := range []struct {
		name      string
		speed     string
		joins     bool
		resumed   bool
		calls     []string
		shapes    []machines.Shape
		phaseWant string
	}{
		{"slower", types.HardwareSpeedSlower, false, false,
			[]string{"preflight", "provision", "destroy-bootstrap", "provision(bootstrap done)"},
			[]machines.Shape{{Masters: masters}, all}, "create the workers held back during bootstrap"},
		{"slower resumed after bootstrap-complete", types.HardwareSpeedSlower, false, true,
			[]string{"preflight(bootstrap done)", "provision(bootstrap done)", "destroy-bootstrap(bootstrap done)"},
			[]machines.Shape{all}, "create the workers held back during bootstrap: skipped"},
		{"standard", types.HardwareSpeedStandard, false, false,
			[]string{"preflight", "provision", "destroy-bootstrap"},
			[]machines.Shape{all}, "create the workers held back during bootstrap: skipped"},
		{"bootstrap joins as a worker", types.HardwareSpeedStandard, true, false,
			[]string{"preflight", "provision", "destroy-bootstrap", "provision(bootstrap done)"},
			[]machines.Shape{all, all}, "create the workers held back during bootstrap"},
		{"bootstrap joins as a worker, resumed after bootstrap-complete", types.HardwareSpeedStandard, true, true,
			[]string{"preflight(bootstrap done)", "provision(bootstrap done)", "destroy-bootstrap(bootstrap done)"},
			[]machines.Shape{all}, "create the workers held back during bootstrap: skipped"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, prov, api, logs := setup(t)
			c.Config.ControlPlaneHardwareSpeed = tc.speed
			if tc.joins {
				c.Config.Platform.SSH = &ssh.Platform{Hosts: []ssh.Host{
					{Name: all.Workers[0], Address: "192.168.10.10", Role: ssh.RoleBootstrap, JoinAsWorker: true},
					{Name: masters[0], Address: "192.168.10.11", Role: ssh.RoleMaster},
				}}
			}
			if tc.resumed {
				prov.cluster.bootstrapComplete(context.Background())
			}
			if _, err := create(c, prov, api, logs); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(prov.calls, tc.calls) {
				t.Errorf("provisioner calls = %q, want %q", prov.calls, tc.calls)
			}
			if fmt.Sprint(prov.shapes) != fmt.Sprint(tc.shapes) {
				t.Errorf("provisioned shapes = %v, want %v", prov.shapes, tc.shapes)
			}
			if got := phasesRun(logs.String()); !slices.Contains(got, tc.phaseWant) {
				t.Errorf("phases = %q, want %q among them", got, tc.phaseWant)
			}
			// install-complete waits for every node, workers included.
			if c.Nodes() != 2 {
				t.Errorf("install-complete waits for %d nodes, want 2", c.Nodes())
			}
		})
	}
}

// A create resumed after bootstrap-complete does not check the bootstrap
// credentials (they may have expired by then) and tells the provisioner not
// to bring the bootstrap machine back.
func TestCreateResumedAfterBootstrapComplete(t *testing.T) {
	c, prov, api, logs := setup(t)
	c.TokenExpiry = time.Now().Add(-time.Hour)
	prov.cluster.bootstrapComplete(context.Background())
	if _, err := create(c, prov, api, logs); err != nil {
		t.Fatal(err)
	}
	want := []string{"preflight(bootstrap done)", "provision(bootstrap done)", "destroy-bootstrap(bootstrap done)"}
	if !slices.Equal(prov.calls, want) {
		t.Errorf("provisioner calls = %q, want %q", prov.calls, want)
	}
	if got := phasesRun(logs.String()); len(got) == 0 || got[0] != "check the bootstrap credentials: skipped" {
		t.Errorf("phases = %q: the credential check should be skipped first", got)
	}
}

// After a host reboot the API is down, so it cannot say bootstrap completed:
// the record in --dir does, and the resumed create neither checks the
// bootstrap credentials nor brings the bootstrap machine back.
func TestCreateResumedAfterHostReboot(t *testing.T) {
	c, prov, api, logs := setup(t)
	if _, err := create(c, prov, api, logs); err != nil {
		t.Fatal(err)
	}
	c.TokenExpiry = time.Now().Add(-time.Hour)
	// An API that answers only once provisioning restarted the machines:
	// before, it cannot tell that bootstrap completed.
	c2, prov2, api2, logs2 := setup(t)
	c2.Dir, c2.TokenExpiry = c.Dir, c.TokenExpiry
	if _, err := create(c2, prov2, api2, logs2); err != nil {
		t.Fatal(err)
	}
	want := []string{"preflight(bootstrap done)", "provision(bootstrap done)", "destroy-bootstrap(bootstrap done)"}
	if !slices.Equal(prov2.calls, want) {
		t.Errorf("provisioner calls = %q, want %q", prov2.calls, want)
	}
}

// restartingProv is a provisioner that can stop and start its cluster.
type restartingProv struct{ *recordingProv }

func (p restartingProv) Stop(_ context.Context, c *platforms.Cluster) error {
	return p.record("stop", c)
}

func (p restartingProv) Start(ctx context.Context, c *platforms.Cluster) error {
	if err := p.record("start", c); err != nil {
		return err
	}
	p.cluster.up(ctx)
	return nil
}

func TestStopAndStart(t *testing.T) {
	c, prov, api, logs := setup(t)
	l := logrus.New()
	l.SetOutput(logs)
	l.SetLevel(logrus.DebugLevel)
	var out bytes.Buffer
	rp := restartingProv{prov}
	if err := Stop(context.Background(), c, rp, l, &out); err != nil {
		t.Fatal(err)
	}
	if err := Start(context.Background(), c, rp, API{Waits: api}, l, &out); err != nil {
		t.Fatal(err)
	}
	if want := []string{"stop", "start"}; !slices.Equal(prov.calls, want) {
		t.Errorf("provisioner calls = %q, want %q", prov.calls, want)
	}
	want := []string{"stop the cluster", "start the cluster", "wait for the API", "wait for install-complete"}
	if got := phasesRun(logs.String()); !slices.Equal(got, want) {
		t.Errorf("phases = %q, want %q", got, want)
	}
	for _, s := range []string{"Cluster demo-x7k2p stopped", "Cluster demo-x7k2p started: 2 nodes Ready"} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("output lacks %q:\n%s", s, out.String())
		}
	}

	// Nodes that never come back fail the start as an install error.
	c.Timeouts.Install = 20 * time.Millisecond
	prov.fail = map[string]error{}
	prov.cluster = &fakeCluster{client: prov.cluster.client, nodes: 1}
	prov.cluster.client.CoreV1().Nodes().Delete(context.Background(), "node-1", metav1.DeleteOptions{})
	if err := Start(context.Background(), c, rp, API{Waits: api}, l, &out); exitcode.Of(err) != exitcode.Install {
		t.Errorf("start with a node missing: %v (kind %d), want an install error", err, exitcode.Of(err))
	}
	// A failing start is an infrastructure error.
	prov.fail = map[string]error{"start": errors.New("apply failed")}
	if err := Start(context.Background(), c, rp, API{Waits: api}, l, &out); exitcode.Of(err) != exitcode.Infrastructure {
		t.Errorf("failing start: %v, want an infrastructure error", err)
	}
	// A platform that cannot restart is told so, as bad input.
	if err := Stop(context.Background(), c, prov, l, &out); exitcode.Of(err) != exitcode.Input {
		t.Errorf("stop on a platform without Restarter: %v", err)
	}
}

// Each phase's failure stops the install and is reported as its kind: the
// exit code of docs/exit-codes.md.
func TestCreateFailureKinds(t *testing.T) {
	tests := []struct {
		name      string
		setup     func(*Cluster, *recordingProv, *fakeAPI)
		wantCalls []string
		wantKind  exitcode.Kind
	}{
		{"credentials expire too soon", func(c *Cluster, _ *recordingProv, _ *fakeAPI) { c.TokenExpiry = time.Now().Add(time.Hour) },
			nil, exitcode.Input},
		{"preflight", func(_ *Cluster, p *recordingProv, _ *fakeAPI) {
			p.fail = map[string]error{"preflight": errors.New("no cgroup")}
		},
			[]string{"preflight"}, exitcode.Infrastructure},
		{"provision", func(_ *Cluster, p *recordingProv, _ *fakeAPI) {
			p.fail = map[string]error{"provision": errors.New("apply failed")}
		},
			[]string{"preflight", "provision"}, exitcode.Infrastructure},
		{"install-config problem found by the provisioner", func(_ *Cluster, p *recordingProv, _ *fakeAPI) {
			p.fail = map[string]error{"provision": fmt.Errorf("layout: %w", &platforms.ConfigError{Err: errors.New("no room")})}
		}, []string{"preflight", "provision"}, exitcode.Input},
		{"API never answers", func(_ *Cluster, _ *recordingProv, a *fakeAPI) { a.apiErr = errors.New("connection refused") },
			[]string{"preflight", "provision"}, exitcode.Bootstrap},
		{"bootstrap never completes", func(c *Cluster, p *recordingProv, _ *fakeAPI) {
			c.Timeouts.Bootstrap = 20 * time.Millisecond
			p.cluster.stuck = true
		}, []string{"preflight", "provision"}, exitcode.Bootstrap},
		{"destroy bootstrap", func(_ *Cluster, p *recordingProv, _ *fakeAPI) {
			p.fail = map[string]error{"destroy-bootstrap": errors.New("terraform destroy failed")}
		}, []string{"preflight", "provision", "destroy-bootstrap"}, exitcode.Infrastructure},
		{"nodes never Ready", func(c *Cluster, p *recordingProv, _ *fakeAPI) {
			c.Timeouts.Install = 20 * time.Millisecond
			p.cluster.nodes = 1 // of 2
		}, []string{"preflight", "provision", "destroy-bootstrap"}, exitcode.Install},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, prov, api, logs := setup(t)
			tt.setup(c, prov, api)
			out, err := create(c, prov, api, logs)
			if err == nil {
				t.Fatal("create succeeded")
			}
			if got := exitcode.Of(err); got != tt.wantKind {
				t.Errorf("kind = %d, want %d (err %v)", got, tt.wantKind, err)
			}
			if !slices.Equal(prov.calls, tt.wantCalls) {
				t.Errorf("provisioner calls = %q, want %q", prov.calls, tt.wantCalls)
			}
			if out != "" {
				t.Errorf("a failed create printed a summary: %s", out)
			}
		})
	}
}

// prober is a provisioner whose nodes can run the network probe.
type prober struct{ *recordingProv }

func (prober) ProbeContainer(name string, _ ...string) (corev1.Container, []corev1.Volume) {
	return corev1.Container{Name: name}, nil
}

func TestCheckPodNetworkRunsOnlyForProbers(t *testing.T) {
	c, prov, api, _ := setup(t)
	for _, tt := range []struct {
		prov platforms.Provisioner
		want bool
	}{{prov, false}, {prober{prov}, true}} {
		got, err := checkPodNetwork{c, API{Waits: api}, tt.prov}.ShouldRun(context.Background())
		if err != nil || got != tt.want {
			t.Errorf("ShouldRun(%T) = %v, %v; want %v", tt.prov, got, err, tt.want)
		}
	}
}

func TestProvisionerOfUnprovisionedPlatform(t *testing.T) {
	if _, err := Provisioner("local", platforms.Env{}); err != nil {
		t.Fatalf("local: %v", err)
	}
	_, err := Provisioner("none", platforms.Env{})
	if exitcode.Of(err) != exitcode.Input || !strings.Contains(err.Error(), "kiln wait-for bootstrap-complete") {
		t.Errorf("none: %v", err)
	}
	if _, err := Provisioner("mars", platforms.Env{}); exitcode.Of(err) != exitcode.Input {
		t.Errorf("unknown platform: %v", err)
	}
}

// Once install-complete is reached, the install-time join token is gone
// from the cluster, and only it: nothing may join with it any more.
func TestCreateRetiresTheInstallJoinToken(t *testing.T) {
	c, prov, api, logs := setup(t)
	secrets := api.Client.CoreV1().Secrets("kube-system")
	for _, name := range []string{c.TokenSecret, "bootstrap-token-other"} {
		if _, err := secrets.Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := create(c, prov, api, logs); err != nil {
		t.Fatal(err)
	}
	if _, err := secrets.Get(context.Background(), c.TokenSecret, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the install-time join token survived install-complete: %v", err)
	}
	if _, err := secrets.Get(context.Background(), "bootstrap-token-other", metav1.GetOptions{}); err != nil {
		t.Errorf("another token was deleted: %v", err)
	}
	// A resumed create finds it gone and is content.
	if err := (retireJoinToken{c, API{Waits: api, Client: api.Client}}).Run(context.Background()); err != nil {
		t.Errorf("retiring the token again: %v", err)
	}
}
