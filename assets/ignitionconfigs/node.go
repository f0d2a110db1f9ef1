package ignitionconfigs

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"slices"
	"sort"
	"strings"
	"text/template"
	"time"

	"github.com/coreos/ignition/v2/config/v3_3/types"

	"github.com/kiln-project/kiln/assets/installconfig"
	installtypes "github.com/kiln-project/kiln/assets/installconfig/types"
	"github.com/kiln-project/kiln/assets/manifests"
	"github.com/kiln-project/kiln/assets/tls"
	butanefs "github.com/kiln-project/kiln/data/butane"
	"github.com/kiln-project/kiln/graph"
	"github.com/kiln-project/kiln/ignition"
	"github.com/kiln-project/kiln/ignition/nodelayout"
)

// Roles of kiln's machines.
const (
	RoleBootstrap = "bootstrap"
	RoleMaster    = "master"
	RoleWorker    = "worker"
)

// nodeValues is what data/butane's templates read.
type nodeValues struct {
	Layout nodelayout.Layout // the paths and port shared with kiln's node agents
	Role   string
	Joins  bool // the kubelet registers with the API (not the bootstrap machine's standalone kubelet)
	Taint  bool // masters refuse ordinary pods because workers exist
	SSHKey string
	Proxy  string
	// TrustBundle says install-config's additionalTrustBundle is set:
	// containerd trusts it for pulls.
	TrustBundle      bool
	ClusterDNSDomain string
	DNSServiceIP     string
	MasterReplicas   int
	// RetireFirst makes bootkube retire the temporary control plane as soon
	// as the masters' etcd members vote (controlPlaneHardwareSpeed Slower).
	RetireFirst bool
	NetworkType string // networking.networkType, for kiln-netd
	// EgressNAT is networking.egress NAT: kiln-netd masquerades pod
	// traffic leaving the pod networks (ClusterCIDRs) and the Service
	// network (ServiceCIDR).
	EgressNAT    bool
	ClusterCIDRs string
	ServiceCIDR  string
	// CSRApproverDenyFlags are the --deny-* flags of the bootstrap
	// machine's CSR approver, the Deployment's.
	CSRApproverDenyFlags []string
	// RegistryHosts are containerd's hosts.toml files of the cluster's
	// registry (registryhosts.go); none without it.
	RegistryHosts []registryHost
	// EtcdMemberValidity is pki.leafValidity for the etcd member
	// certificates the bootstrap machine issues; empty for the default,
	// which the agents assume.
	EtcdMemberValidity string
	// CertsRenewBefore is pki.renewBefore for a master's renewal timer,
	// CertsRenewEvery how often it looks; both empty with pki.renewal
	// Manual (no timer).
	CertsRenewBefore, CertsRenewEvery string
}

// baseConfig renders common.bu and <role>.bu and merges them.
func baseConfig(role string, ic *installconfig.InstallConfig, v *manifests.Values) (types.Config, error) {
	c := ic.Config
	nv := nodeValues{
		Layout:               nodelayout.Values(),
		Role:                 role,
		Joins:                role != RoleBootstrap,
		Taint:                role == RoleMaster && v.WorkerReplicas > 0,
		SSHKey:               strings.TrimSpace(c.SSHKey),
		ClusterDNSDomain:     v.ClusterDNSDomain,
		DNSServiceIP:         v.DNSServiceIP,
		MasterReplicas:       v.MasterReplicas,
		RetireFirst:          v.SlowerControlPlane,
		NetworkType:          v.NetworkType,
		EgressNAT:            v.Egress == installtypes.EgressNAT,
		ClusterCIDRs:         v.ClusterCIDRs,
		ServiceCIDR:          v.ServiceCIDR,
		CSRApproverDenyFlags: manifests.CSRApproverDenyFlags(c),
		RegistryHosts:        registryHosts(c),
		TrustBundle:          c.AdditionalTrustBundle != "",
	}
	res, err := ic.Resolved()
	if err != nil {
		return types.Config{}, err
	}
	if res.LeafValidity != tls.LeafValidity {
		nv.EtcdMemberValidity = res.LeafValidity.String()
	}
	if role == RoleMaster && res.AutomaticRenewal {
		nv.CertsRenewBefore, nv.CertsRenewEvery = res.RenewBefore.String(), renewEvery(res).String()
	}
	if p := c.Proxy; p != nil {
		nv.Proxy = unitEnvironment(map[string]string{"HTTP_PROXY": p.HTTPProxy, "HTTPS_PROXY": p.HTTPSProxy, "NO_PROXY": noProxy(c, res)})
	}
	cfg := ignition.New()
	for _, name := range []string{"common.bu", role + ".bu"} {
		part, err := renderButane(name, nv)
		if err != nil {
			return types.Config{}, err
		}
		cfg = ignition.Merge(cfg, part)
	}
	if c.AdditionalTrustBundle != "" {
		ignition.AddFile(&cfg, nodelayout.TrustBundleFile, 0o644, []byte(c.AdditionalTrustBundle))
	}
	return cfg, nil
}

// renewEvery is how often a master's renewal timer looks at its
// certificates: a fifth of the time a new certificate is not yet due
// (leafValidity less renewBefore), so one is renewed at most a fifth of
// that late, between a minute (tests' short lifetimes) and an hour.
func renewEvery(res installtypes.Resolved) time.Duration {
	return min(max((res.LeafValidity-res.RenewBefore)/5, time.Minute), time.Hour).Round(time.Second)
}

// noProxy is proxy.noProxy with what must never go through the proxy:
// the loopback, the cluster's names (the API's internal name, Services'
// .svc and .cluster.local names) and its pod, Service and machine
// networks, as OpenShift adds them. The user's entries come first.
func noProxy(c *installtypes.Config, res installtypes.Resolved) string {
	var out []string
	seen := map[string]bool{}
	add := func(s string) {
		if s = strings.TrimSpace(s); s != "" && !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	for _, s := range strings.Split(c.Proxy.NoProxy, ",") {
		add(s)
	}
	for _, s := range []string{"localhost", "127.0.0.1", c.APIIntName(), ".svc", "." + manifests.ClusterDNSDomain} {
		add(s)
	}
	for _, p := range append(append(slices.Clone(res.ClusterNetworks), res.ServiceNetwork), res.MachineNetwork) {
		if p.IsValid() {
			add(p.String())
		}
	}
	return strings.Join(out, ",")
}

// unitEnvironment renders the non-empty variables of env, sorted, as the
// value of one systemd Environment= line. systemd unquotes each
// "KEY=value" word, undoes its C escapes (which %q writes for quotes,
// backslashes and control characters), then expands %-specifiers: every %
// is doubled, or a proxy URL whose password holds %40 loses the variable as
// an unresolvable specifier.
func unitEnvironment(env map[string]string) string {
	var words []string
	for k, v := range env {
		if v != "" {
			words = append(words, fmt.Sprintf("%q", strings.ReplaceAll(k+"="+v, "%", "%%")))
		}
	}
	sort.Strings(words)
	return strings.Join(words, " ")
}

func renderButane(name string, data nodeValues) (types.Config, error) {
	src, err := fs.ReadFile(butanefs.FS, name)
	if err != nil {
		return types.Config{}, err
	}
	t, err := template.New(name).Option("missingkey=error").Funcs(template.FuncMap{
		"quote": func(s string) string { b, _ := json.Marshal(s); return string(b) },
	}).Parse(string(src))
	if err != nil {
		return types.Config{}, fmt.Errorf("data/butane/%s: %w", name, err)
	}
	var buf bytes.Buffer
	if err := t.Execute(&buf, data); err != nil {
		return types.Config{}, fmt.Errorf("data/butane/%s: %w", name, err)
	}
	return ignition.FromButane(name, buf.Bytes())
}

// placement puts a file of --dir (by path, from a bundle of files) on the
// machine at dest with mode.
type placement struct {
	src, dest string
	mode      int
}

// place adds each placement's file from the bundle; a missing source is a
// programming error in the placement tables.
func place(cfg *types.Config, bundle *tls.Bundle, ps []placement) error {
	for _, p := range ps {
		f := bundle.File(p.src)
		if f == nil {
			return fmt.Errorf("no %s to place at %s", p.src, p.dest)
		}
		ignition.AddFile(cfg, p.dest, p.mode, f.Data)
	}
	return nil
}

// addFileSet places rendered manifest files under dir, keeping base names.
func addFileSet(cfg *types.Config, dir string, files []*graph.File, mode int) {
	for _, f := range files {
		ignition.AddFile(cfg, dir+"/"+baseName(f.Path), mode, f.Data)
	}
}

func baseName(p string) string { return p[strings.LastIndex(p, "/")+1:] }
