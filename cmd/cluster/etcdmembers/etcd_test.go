package etcdmembers

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	kilntls "github.com/kiln-project/kiln/assets/tls"
	"github.com/kiln-project/kiln/assets/tls/tlstest"
)

// testCluster starts embedded etcd servers on 127.0.0.1, each with TLS on
// its client and peer URLs from certificates Issue made with the test CA,
// as kiln's members have.
type testCluster struct {
	t  *testing.T
	ca *kilntls.CertKey
}

// testMember is one embedded server.
type testMember struct {
	name, peer, client string
	pki                string
	etcd               *embed.Etcd
	stop               func()
}

// freeURL is an https URL on 127.0.0.1 at a port that was free a moment
// ago.
func freeURL(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return "https://" + l.Addr().String()
}

func parseURL(t *testing.T, s string) url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return *u
}

// start starts member name at peer URL peer, joining initial as state
// ("new" or "existing"); it does not wait for it.
func (c *testCluster) start(name, peer, initial, state string) (*testMember, error) {
	t := c.t
	dir := t.TempDir()
	certs, err := Issue(context.Background(), c.ca, name, net.IPv4(127, 0, 0, 1), kilntls.LeafValidity)
	if err != nil {
		return nil, err
	}
	for f, data := range Files(c.ca.Cert, certs) {
		if err := os.WriteFile(filepath.Join(dir, f), data, 0o600); err != nil {
			return nil, err
		}
	}
	m := &testMember{name: name, peer: peer, client: freeURL(t), pki: dir}
	cfg := embed.NewConfig()
	cfg.Name = name
	cfg.Dir = filepath.Join(dir, "data")
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	// Faster heartbeats than etcd's defaults (100 ms, 1 s), loose enough
	// for a loaded test machine.
	cfg.TickMs, cfg.ElectionMs = 50, 1000
	// etcd's own reconfiguration check makes a change wait until every
	// member has been connected for 5 s; kiln does not rely on it (its
	// callers retry), and these tests check kiln's own.
	cfg.StrictReconfigCheck = false
	cfg.ListenPeerUrls = []url.URL{parseURL(t, peer)}
	cfg.AdvertisePeerUrls = cfg.ListenPeerUrls
	cfg.ListenClientUrls = []url.URL{parseURL(t, m.client)}
	cfg.AdvertiseClientUrls = cfg.ListenClientUrls
	cfg.InitialCluster = initial
	cfg.ClusterState = state
	cfg.ClientTLSInfo = transport.TLSInfo{CertFile: filepath.Join(dir, ServerCert), KeyFile: filepath.Join(dir, ServerKey),
		TrustedCAFile: filepath.Join(dir, CACert), ClientCertAuth: true}
	cfg.PeerTLSInfo = transport.TLSInfo{CertFile: filepath.Join(dir, PeerCert), KeyFile: filepath.Join(dir, PeerKey),
		TrustedCAFile: filepath.Join(dir, CACert), ClientCertAuth: true}
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	m.etcd = e
	m.stop = sync.OnceFunc(e.Close)
	t.Cleanup(m.stop)
	return m, nil
}

// ready waits until m serves.
func (m *testMember) ready(t *testing.T) {
	t.Helper()
	select {
	case <-m.etcd.Server.ReadyNotify():
	case err := <-m.etcd.Err():
		t.Fatalf("%s: %v", m.name, err)
	case <-time.After(15 * time.Second):
		t.Fatalf("%s not ready after 15s", m.name)
	}
}

// dial connects to m with its own server certificate, as etcd-install does.
func (m *testMember) dial(t *testing.T) *clientv3.Client {
	t.Helper()
	c, err := Dial([]string{m.client}, filepath.Join(m.pki, CACert), filepath.Join(m.pki, ServerCert), filepath.Join(m.pki, ServerKey))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// embedInstaller is an Installer that starts the learner as an embedded
// server with the --initial-cluster Join gave it.
type embedInstaller struct {
	c       *testCluster
	name    string
	peer    string
	started *testMember
}

func (i *embedInstaller) Install(_ context.Context, members []*etcdserverpb.Member, id uint64) error {
	m, err := i.c.start(i.name, i.peer, initialCluster(members, id, i.name), "existing")
	i.started = m
	return err
}

func (i *embedInstaller) Lost(context.Context) bool { return i.started == nil }

// join calls Join until the member name votes and returns it with the
// steps seen, in order and without repeats.
func (c *testCluster) join(ctx context.Context, cli Client, name string) (*testMember, []Step) {
	t := c.t
	t.Helper()
	inst := &embedInstaller{c: c, name: name, peer: freeURL(t)}
	var steps []Step
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		p, err := Join(ctx, cli, name, inst.peer, inst)
		if err != nil {
			t.Fatalf("join %s: %v (steps %v)", name, err, steps)
		}
		if len(steps) == 0 || steps[len(steps)-1] != p.Step {
			steps = append(steps, p.Step)
		}
		if p.Step == Voting {
			return inst.started, steps
		}
		if p.Step == Added {
			inst.started.ready(t) // the learner published its name
		}
		select {
		case <-ctx.Done():
			t.Fatalf("join %s: %v; steps %v, last %+v", name, ctx.Err(), steps, p)
		case <-tick.C:
		}
	}
}

// until polls check until it is true.
func until(ctx context.Context, t *testing.T, what string, check func() (bool, string)) {
	t.Helper()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, why := check()
		if ok {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: %v: %s", what, ctx.Err(), why)
		case <-tick.C:
		}
	}
}

// TestMembershipOnEmbeddedEtcd runs the membership changes of a scale
// against real etcd servers: a one-member cluster grows by two learners,
// each promoted once caught up, leadership moves there and back, a
// removal that would lose quorum is refused naming the member that is
// down, and members are removed down to the last, which is refused.
func TestMembershipOnEmbeddedEtcd(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := &testCluster{t: t, ca: tlstest.CA(t)}
	peer := freeURL(t)
	m0, err := c.start("m0", peer, "m0="+peer, "new")
	if err != nil {
		t.Fatal(err)
	}
	m0.ready(t)
	cli := m0.dial(t)

	m1, steps := c.join(ctx, cli, "m1")
	if steps[0] != Added || !slices.Contains(steps, Promoted) || steps[len(steps)-1] != Voting || slices.Contains(steps, Reinstalled) {
		t.Errorf("join steps %v: want Added first, then Promoted and Voting", steps)
	}
	until(ctx, t, "m1 caught up", func() (bool, string) { return CaughtUp(ctx, cli, "m1") })

	// Leadership to m1 and back; only the leader hands it over.
	id := func(m *testMember) uint64 { return uint64(m.etcd.Server.MemberID()) }
	for _, move := range []struct{ from, to *testMember }{{m0, m1}, {m1, m0}} {
		from := move.from.dial(t)
		if moved, err := MoveLeader(ctx, from, move.from.client, id(move.to)); !moved || err != nil {
			t.Fatalf("MoveLeader %s -> %s = %v, %v", move.from.name, move.to.name, moved, err)
		}
		if moved, err := MoveLeader(ctx, from, move.from.client, id(move.to)); moved || err != nil {
			t.Fatalf("MoveLeader from %s, a follower now = %v, %v; want nothing done", move.from.name, moved, err)
		}
	}

	m2, _ := c.join(ctx, cli, "m2")
	until(ctx, t, "m2 caught up", func() (bool, string) { return CaughtUp(ctx, cli, "m2") })
	m2.stop()

	// m0 and m2 would be left, and m2 does not answer (within StatusTimeout).
	removed, err := Remove(ctx, cli, "m1", false)
	var qe *QuorumError
	if removed || !errors.As(err, &qe) || !reflect.DeepEqual(qe.Down, []string{"m2"}) || len(qe.Left) != 2 {
		t.Fatalf("Remove(m1) with m2 down = %v, %v; want a refusal naming m2", removed, err)
	}
	for _, name := range []string{"m2", "m1"} {
		if removed, err := Remove(ctx, cli, name, false); !removed || err != nil {
			t.Fatalf("Remove(%s) = %v, %v", name, removed, err)
		}
	}
	if removed, err := Remove(ctx, cli, "m2", false); removed || err != nil {
		t.Errorf("Remove(m2) again = %v, %v; want nothing to do", removed, err)
	}
	if removed, err := Remove(ctx, cli, "m0", false); removed || !errors.As(err, &qe) || len(qe.Left) != 0 {
		t.Errorf("Remove(m0), the last voter = %v, %v; want a refusal", removed, err)
	}
	list, err := cli.MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Members) != 1 || list.Members[0].Name != "m0" {
		t.Errorf("members left: %v, want m0 alone", list.Members)
	}
}
