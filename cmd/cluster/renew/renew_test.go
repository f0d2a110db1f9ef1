package renew

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/kiln-project/kiln/assets/installconfig"
	"github.com/kiln-project/kiln/assets/targets"
	kilntls "github.com/kiln-project/kiln/assets/tls"
	"github.com/kiln-project/kiln/cmd/cluster/exitcode"
	"github.com/kiln-project/kiln/cmd/cluster/install"
	"github.com/kiln-project/kiln/graph"
	"github.com/kiln-project/kiln/graph/installdir"
	"github.com/kiln-project/kiln/ignition/certbundle"
	"github.com/kiln-project/kiln/ignition/nodelayout"
	"github.com/kiln-project/kiln/platforms"
)

const config = `apiVersion: kiln.dev/v1
metadata:
  name: dev
baseDomain: example.com
controlPlane:
  name: master
  replicas: 3
compute:
- name: worker
  replicas: 1
networking:
  egress: None
  machineNetwork:
  - cidr: 10.66.50.0/24
pki:
  leafValidity: 240h
platform:
  local: {}
`

// newCluster returns a --dir with Ignition configs and its cluster.
func newCluster(t *testing.T) *install.Cluster {
	t.Helper()
	dir := t.TempDir()
	ctx := installconfig.WithInput(t.Context(), installconfig.Input{In: strings.NewReader(config)})
	for _, tg := range []graph.Target{targets.InstallConfig(), targets.IgnitionConfigs()} {
		s, err := graph.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Persist(ctx, tg); err != nil {
			t.Fatal(err)
		}
	}
	s, err := graph.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	c, err := install.Load(t.Context(), s, dir, install.Timeouts{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// shell records what a renewal does on the masters; failOn fails the
// node command there.
type shell struct {
	mu      sync.Mutex
	bundles map[string]certbundle.Bundle
	ran     []string
	// locked are the nodes that ran with the cluster's renewal lock.
	locked []string
	failOn string
}

func (s *shell) PutNodeFile(_ context.Context, _ *platforms.Cluster, node, path string, src io.Reader, mode fs.FileMode) error {
	data, err := io.ReadAll(src)
	if err != nil {
		return err
	}
	if path != nodelayout.CertsRenewBundle || mode != 0o600 {
		return errors.New("unexpected file " + path)
	}
	var b certbundle.Bundle
	if err := json.Unmarshal(data, &b); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.bundles[node] = b
	return nil
}

func (s *shell) RunOnNode(_ context.Context, _ *platforms.Cluster, node string, argv ...string) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	lock := slices.Equal(argv, NodeArgv(time.Minute, true))
	if !lock && !slices.Equal(argv, NodeArgv(time.Minute, false)) {
		return nil, errors.New("unexpected command")
	}
	if lock {
		s.locked = append(s.locked, node)
	}
	if node == s.failOn {
		return []byte("the API server has not restarted yet"), errors.New("exit status 1")
	}
	s.ran = append(s.ran, node)
	return nil, nil
}

type waits struct{ install.Waits }

func (waits) API(context.Context, string, time.Duration) (string, error) { return "v1.36.3", nil }
func (waits) InstallComplete(context.Context, int, time.Duration) error  { return nil }

func renewal(c *install.Cluster, sh *shell, apiDown bool, reissued *int) *Renewal {
	return &Renewal{
		Cluster: c, Shell: sh,
		Reissue: func(ctx context.Context, ids []string) error {
			*reissued++
			s, err := graph.Open(c.Dir, graph.WithRenew(ids...))
			if err != nil {
				return err
			}
			return s.Persist(ctx, targets.IgnitionConfigs())
		},
		APIReady: func(context.Context) error {
			if apiDown {
				return errors.New("x509: certificate has expired")
			}
			return nil
		},
		API: func() (install.API, error) {
			return install.API{Waits: waits{}, Server: "https://10.66.50.1:6443"}, nil
		},
		Log:      logrus.New(),
		Progress: platforms.NoProgress{},
		Out:      io.Discard,
		Now:      time.Now,
	}
}

// servingCert is the API server's certificate in dir's state.
func servingCert(t *testing.T, dir string) []byte {
	t.Helper()
	s, err := graph.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	a := &kilntls.APIServer{}
	if found, err := s.FromState(a); err != nil || !found {
		t.Fatalf("no %s in the state: %v", a.ID(), err)
	}
	return a.Cert
}

func file(b certbundle.Bundle, path string) []byte {
	for _, f := range b.Files {
		if f.Path == path {
			return f.Data
		}
	}
	return nil
}

func cert(t *testing.T, data []byte) *x509.Certificate {
	t.Helper()
	p, _ := pem.Decode(data)
	if p == nil {
		t.Fatal("no PEM")
	}
	c, err := x509.ParseCertificate(p.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// With the API up the masters are renewed one at a time, in order, each
// with the leaves --dir now holds and etcd member certificates of its own
// address, for pki.leafValidity; --dir's kubeconfig is renewed and the
// journal is gone at the end.
func TestRenewOneMasterAtATime(t *testing.T) {
	c := newCluster(t)
	masters := c.Machines().Masters
	oldServing := servingCert(t, c.Dir)
	oldAdmin, _ := os.ReadFile(c.Kubeconfig)
	sh := &shell{bundles: map[string]certbundle.Bundle{}}
	reissued := 0
	if err := renewal(c, sh, false, &reissued).Run(t.Context(), Options{Timeout: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(sh.ran, masters) || reissued != 1 {
		t.Fatalf("ran on %v (reissued %d times), want %v in order, once", sh.ran, reissued, masters)
	}
	if !slices.Equal(sh.locked, masters) {
		t.Errorf("ran with the renewal lock on %v, want every master", sh.locked)
	}
	serving := servingCert(t, c.Dir)
	if string(serving) == string(oldServing) {
		t.Error("tls/apiserver.crt was not renewed")
	}
	if admin, _ := os.ReadFile(c.Kubeconfig); string(admin) == string(oldAdmin) {
		t.Error("auth/kubeconfig was not renewed")
	}
	for i, m := range masters {
		b := sh.bundles[m]
		if got := file(b, nodelayout.PKIDir+"/apiserver.crt"); string(got) != string(serving) {
			t.Errorf("%s got another serving certificate than --dir's", m)
		}
		if err := b.Check(); err != nil {
			t.Errorf("%s: %v", m, err)
		}
		peer := cert(t, file(b, nodelayout.EtcdPKIDir+"/peer.crt"))
		if want := "10.66.50." + []string{"11", "12", "13"}[i]; len(peer.IPAddresses) != 1 || peer.IPAddresses[0].String() != want ||
			peer.Subject.CommonName != "system:etcd-peer:"+m {
			t.Errorf("%s: peer certificate %s for %v, want its own name and %s", m, peer.Subject, peer.IPAddresses, want)
		}
		if d := peer.NotAfter.Sub(peer.NotBefore); d < 240*time.Hour || d > 241*time.Hour {
			t.Errorf("%s: peer certificate valid %s, want pki.leafValidity", m, d)
		}
	}
	if _, err := os.Stat(filepath.Join(c.Dir, installdir.RenewJournal)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the journal is still there: %v", err)
	}
}

// With the API down every master is renewed at once.
func TestRenewAllMastersAtOnceWhenTheAPIIsDown(t *testing.T) {
	c := newCluster(t)
	sh := &shell{bundles: map[string]certbundle.Bundle{}}
	reissued := 0
	if err := renewal(c, sh, true, &reissued).Run(t.Context(), Options{Timeout: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if got := slices.Sorted(slices.Values(sh.ran)); !slices.Equal(got, c.Machines().Masters) {
		t.Errorf("ran on %v", got)
	}
	if len(sh.locked) > 0 {
		t.Errorf("ran with the renewal lock on %v: etcd cannot answer with the certificates expired", sh.locked)
	}
}

// A renewal cut short goes on with the certificates it issued and skips
// the masters done; one of other names is refused while it is under way.
func TestRenewResumes(t *testing.T) {
	c := newCluster(t)
	masters := c.Machines().Masters
	sh := &shell{bundles: map[string]certbundle.Bundle{}, failOn: masters[1]}
	reissued := 0
	err := renewal(c, sh, false, &reissued).Run(t.Context(), Options{Timeout: time.Minute})
	if exitcode.Of(err) != exitcode.Install || !strings.Contains(err.Error(), masters[1]) || !strings.Contains(err.Error(), "has not restarted yet") {
		t.Fatalf("Run = %v; want an install error naming %s and what it printed", err, masters[1])
	}
	first := file(sh.bundles[masters[0]], nodelayout.PKIDir+"/apiserver.crt")

	err = renewal(c, &shell{bundles: map[string]certbundle.Bundle{}}, false, &reissued).Run(t.Context(), Options{Names: []string{"tls/apiserver"}, Timeout: time.Minute})
	if exitcode.Of(err) != exitcode.Input || !strings.Contains(err.Error(), "under way") {
		t.Errorf("another renewal while one is under way: %v", err)
	}

	sh2 := &shell{bundles: map[string]certbundle.Bundle{}}
	if err := renewal(c, sh2, false, &reissued).Run(t.Context(), Options{Timeout: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(sh2.ran, masters[1:]) || reissued != 1 {
		t.Errorf("the second run ran on %v and issued %d times; want %v, and the first run's certificates", sh2.ran, reissued, masters[1:])
	}
	if got := file(sh2.bundles[masters[1]], nodelayout.PKIDir+"/apiserver.crt"); string(got) != string(first) {
		t.Error("the second run put other certificates on the masters than the first")
	}
}

func TestCheckNames(t *testing.T) {
	if err := CheckNames([]string{"tls/apiserver", EtcdMembers}); err != nil {
		t.Error(err)
	}
	err := CheckNames([]string{"tls/root-ca", "tls/apiserver", "tls/etcd-server"})
	if err == nil || !strings.Contains(err.Error(), "tls/root-ca, tls/etcd-server") {
		t.Errorf("CheckNames = %v; want both names refused", err)
	}
}
