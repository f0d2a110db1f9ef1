package machineconfig

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/coreos/ignition/v2/config/v3_3"
	igntypes "github.com/coreos/ignition/v2/config/v3_3/types"
	"github.com/vincent-petithory/dataurl"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
)

// IgnitionVersion is the Ignition spec of spec.config; a fragment without
// ignition.version is taken as this version.
const IgnitionVersion = "3.3.0"

// SourcesAnnotation on a rendered config lists, comma-separated in merge
// order, the MachineConfigs it was rendered from.
const SourcesAnnotation = "kiln.dev/sources"

// Rendered is a pool's merged configuration.
type Rendered struct {
	// Name is rendered-<pool>-<hash of the content>.
	Name string
	// Pool is the pool it was rendered for.
	Pool string
	// Sources are the MachineConfigs merged, in order.
	Sources []string
	// Config is the merged Ignition config.
	Config igntypes.Config
	// KubeletConfig is the merged kubelet drop-in (a JSON object without
	// apiVersion and kind), nil when no MachineConfig sets one.
	KubeletConfig json.RawMessage
}

// FieldError is one refused field of a MachineConfig.
type FieldError struct {
	// MachineConfig is the object's name.
	MachineConfig string
	// Field is the JSON path within the object, from spec.
	Field string
	// Msg says what is wrong.
	Msg string
}

// Error implements error.
func (e *FieldError) Error() string {
	return fmt.Sprintf("MachineConfig %s: %s: %s", e.MachineConfig, e.Field, e.Msg)
}

// PoolSources returns the MachineConfigs of all that join pool, sorted by
// name: those labelled with pool, and for a custom pool those labelled
// worker too (a custom pool's nodes are workers with more configuration).
func PoolSources(pool string, all []MachineConfig) []MachineConfig {
	var out []MachineConfig
	for _, mc := range all {
		p := mc.Labels[PoolLabel]
		if p == pool || (p == WorkerPool && pool != MasterPool) {
			out = append(out, mc)
		}
	}
	slices.SortFunc(out, func(a, b MachineConfig) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Render merges sources (in the order given; PoolSources sorts them) into
// pool's rendered config. Every field a running node cannot apply, in
// every source, is returned at once (errors.Join of *FieldError); nothing
// is rendered then.
func Render(pool string, sources []MachineConfig) (*Rendered, error) {
	r := &Rendered{Pool: pool, Config: igntypes.Config{Ignition: igntypes.Ignition{Version: IgnitionVersion}}}
	var errs []error
	var kubelet map[string]any
	for _, mc := range sources {
		cfg, ferrs := parseConfig(mc)
		errs = append(errs, ferrs...)
		kc, kerr := parseKubelet(mc)
		if kerr != nil {
			errs = append(errs, kerr)
		}
		if len(ferrs) > 0 || kerr != nil {
			continue
		}
		r.Sources = append(r.Sources, mc.Name)
		r.Config = v3_3.Merge(r.Config, cfg)
		if kc != nil {
			kubelet = mergePatch(kubelet, kc)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if kubelet != nil {
		data, err := json.Marshal(kubelet)
		if err != nil {
			return nil, err
		}
		r.KubeletConfig = data
	}
	sum, err := r.hash()
	if err != nil {
		return nil, err
	}
	r.Name = RenderedPrefix + pool + "-" + sum
	return r, nil
}

// hash is the first 20 hex digits of the SHA-256 of the content.
func (r *Rendered) hash() (string, error) {
	data, err := json.Marshal(struct {
		Config        igntypes.Config `json:"config"`
		KubeletConfig json.RawMessage `json:"kubeletConfig,omitempty"`
	}{r.Config, r.KubeletConfig})
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])[:20], nil
}

// parseConfig parses and checks mc's spec.config.
func parseConfig(mc MachineConfig) (igntypes.Config, []error) {
	fail := func(field, format string, args ...any) error {
		return &FieldError{MachineConfig: mc.Name, Field: field, Msg: fmt.Sprintf(format, args...)}
	}
	raw := bytes.TrimSpace(mc.Spec.Config)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return igntypes.Config{Ignition: igntypes.Ignition{Version: IgnitionVersion}}, nil
	}
	var probe struct {
		Ignition struct {
			Version *string `json:"version"`
		} `json:"ignition"`
	}
	if err := json.Unmarshal(raw, &probe); err != nil {
		return igntypes.Config{}, []error{fail("spec.config", "not a JSON object: %v", err)}
	}
	if probe.Ignition.Version == nil {
		var m map[string]any
		_ = json.Unmarshal(raw, &m)
		ign, _ := m["ignition"].(map[string]any)
		if ign == nil {
			ign = map[string]any{}
		}
		ign["version"] = IgnitionVersion
		m["ignition"] = ign
		raw, _ = json.Marshal(m)
	} else if *probe.Ignition.Version != IgnitionVersion {
		return igntypes.Config{}, []error{fail("spec.config.ignition.version", "%q: kiln takes Ignition %s", *probe.Ignition.Version, IgnitionVersion)}
	}
	cfg, rpt, err := v3_3.Parse(raw)
	if err != nil {
		msg := err.Error()
		if rpt.IsFatal() {
			msg = strings.TrimSpace(rpt.String())
		}
		return igntypes.Config{}, []error{fail("spec.config", "%s", msg)}
	}
	return cfg, Supported(mc.Name, cfg)
}

// Supported returns an error for every field of cfg that kiln's node agent
// cannot apply to a running node.
func Supported(name string, cfg igntypes.Config) []error {
	var errs []error
	fail := func(field, format string, args ...any) {
		errs = append(errs, &FieldError{MachineConfig: name, Field: "spec.config." + field, Msg: fmt.Sprintf(format, args...)})
	}
	ign := cfg.Ignition
	if len(ign.Config.Merge) > 0 || ign.Config.Replace.Source != nil {
		fail("ignition.config", "a config that fetches other configs is not applied on a running node")
	}
	if len(ign.Security.TLS.CertificateAuthorities) > 0 || ign.Proxy.HTTPProxy != nil || ign.Proxy.HTTPSProxy != nil {
		fail("ignition", "security and proxy settings fetch nothing on a running node: leave them out")
	}
	if len(cfg.Passwd.Users) > 0 || len(cfg.Passwd.Groups) > 0 {
		fail("passwd", "users and groups are not changed on a running node")
	}
	if len(cfg.KernelArguments.ShouldExist) > 0 || len(cfg.KernelArguments.ShouldNotExist) > 0 {
		fail("kernelArguments", "kiln has no reboot path that changes kernel arguments")
	}
	s := cfg.Storage
	for field, n := range map[string]int{"storage.disks": len(s.Disks), "storage.raid": len(s.Raid), "storage.filesystems": len(s.Filesystems), "storage.luks": len(s.Luks), "storage.links": len(s.Links)} {
		if n > 0 {
			fail(field, "not applied on a running node (files, directories and systemd units are)")
		}
	}
	for i, f := range s.Files {
		field := fmt.Sprintf("storage.files[%d]", i)
		if err := checkPath(f.Path); err != nil {
			fail(field+".path", "%v", err)
		}
		if len(f.Append) > 0 {
			fail(field+".append", "not supported: give the whole contents")
		}
		if f.Contents.Compression != nil && *f.Contents.Compression != "" {
			fail(field+".contents.compression", "not supported")
		}
		if f.Contents.Source != nil {
			if _, err := dataurl.DecodeString(*f.Contents.Source); err != nil {
				fail(field+".contents.source", "only data: URLs (the node fetches nothing): %v", err)
			}
		}
		checkOwner(fail, field, f.User, f.Group)
	}
	for i, d := range s.Directories {
		field := fmt.Sprintf("storage.directories[%d]", i)
		if err := checkPath(d.Path); err != nil {
			fail(field+".path", "%v", err)
		}
		checkOwner(fail, field, d.User, d.Group)
	}
	for i, u := range cfg.Systemd.Units {
		field := fmt.Sprintf("systemd.units[%d]", i)
		if u.Mask != nil && *u.Mask {
			fail(field+".mask", "not supported: disable the unit instead")
		}
		if strings.ContainsAny(u.Name, "/\x00") {
			fail(field+".name", "%q is not a unit name", u.Name)
		}
		for j, d := range u.Dropins {
			if strings.ContainsAny(d.Name, "/\x00") || !strings.HasSuffix(d.Name, ".conf") {
				fail(fmt.Sprintf("%s.dropins[%d].name", field, j), "%q is not a drop-in name (*.conf)", d.Name)
			}
		}
	}
	return errs
}

// checkOwner refuses owners other than root: the agent writes as root and
// looks no names up.
func checkOwner(fail func(field, format string, args ...any), field string, u igntypes.NodeUser, g igntypes.NodeGroup) {
	if (u.ID != nil && *u.ID != 0) || (u.Name != nil && *u.Name != "root") {
		fail(field+".user", "only root may own what kiln writes")
	}
	if (g.ID != nil && *g.ID != 0) || (g.Name != nil && *g.Name != "root") {
		fail(field+".group", "only root may own what kiln writes")
	}
}

// kilnOwned are trees that kiln and Kubernetes keep on a node: a
// MachineConfig writes nothing under them.
var kilnOwned = []string{"/etc/kubernetes/pki", "/var/lib/kiln", "/var/lib/kubelet", "/var/lib/etcd", "/etc/kiln", "/usr/local/bin/kiln", "/proc", "/sys", "/dev"}

// checkPath refuses a path kiln will not write.
func checkPath(p string) error {
	p = path.Clean(p)
	for _, owned := range kilnOwned {
		if p == owned || strings.HasPrefix(p, owned+"/") {
			return fmt.Errorf("%s is under %s, which kiln manages", p, owned)
		}
	}
	return nil
}

// kubeletRefused are KubeletConfiguration fields a MachineConfig may not
// set: they hold the kubelet's authentication and certificates.
var kubeletRefused = []string{"authentication", "authorization", "serverTLSBootstrap", "rotateCertificates", "tlsCertFile", "tlsPrivateKeyFile", "staticPodPath"}

// parseKubelet parses and checks mc's spec.kubeletConfig.
func parseKubelet(mc MachineConfig) (map[string]any, error) {
	raw := bytes.TrimSpace(mc.Spec.KubeletConfig)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, nil
	}
	fail := func(field, format string, args ...any) error {
		return &FieldError{MachineConfig: mc.Name, Field: field, Msg: fmt.Sprintf(format, args...)}
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return nil, fail("spec.kubeletConfig", "not a JSON object")
	}
	for k, want := range map[string]string{"apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration"} {
		if v, ok := m[k]; ok && v != want {
			return nil, fail("spec.kubeletConfig."+k, "%v: leave it out, or give %s", v, want)
		}
		delete(m, k)
	}
	for _, k := range kubeletRefused {
		if _, ok := m[k]; ok {
			return nil, fail("spec.kubeletConfig."+k, "kiln sets this field; a MachineConfig may not")
		}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var kc kubeletv1beta1.KubeletConfiguration
	if err := dec.Decode(&kc); err != nil {
		return nil, fail("spec.kubeletConfig", "not a KubeletConfiguration (kubelet.config.k8s.io/v1beta1): %v", err)
	}
	return m, nil
}

// mergePatch applies patch to base as a JSON merge patch (RFC 7386): a
// later MachineConfig's kubelet settings win, objects merge, null removes.
func mergePatch(base, patch map[string]any) map[string]any {
	if base == nil {
		base = map[string]any{}
	}
	for k, v := range patch {
		if v == nil {
			delete(base, k)
			continue
		}
		pv, ok := v.(map[string]any)
		bv, bok := base[k].(map[string]any)
		if ok && bok {
			base[k] = mergePatch(bv, pv)
			continue
		}
		base[k] = v
	}
	return base
}

// KubeletDropin is the rendered kubelet configuration as the drop-in the
// kubelet reads from its --config-dir: the merged settings with
// apiVersion and kind. It is nil when the config sets none.
func (r *Rendered) KubeletDropin() ([]byte, error) {
	return KubeletDropin(r.KubeletConfig)
}

// KubeletDropin is the drop-in for the merged kubelet settings kc (nil
// when kc is empty).
func KubeletDropin(kc json.RawMessage) ([]byte, error) {
	if len(bytes.TrimSpace(kc)) == 0 {
		return nil, nil
	}
	var m map[string]any
	if err := json.Unmarshal(kc, &m); err != nil {
		return nil, err
	}
	m["apiVersion"] = "kubelet.config.k8s.io/v1beta1"
	m["kind"] = "KubeletConfiguration"
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(data, '\n'), nil
}

// Object is the rendered config as the MachineConfig object the
// controller stores and the agents read.
func (r *Rendered) Object() (*MachineConfig, error) {
	cfg, err := json.Marshal(r.Config)
	if err != nil {
		return nil, err
	}
	mc := &MachineConfig{Spec: MachineConfigSpec{Config: cfg, KubeletConfig: r.KubeletConfig}}
	mc.APIVersion = Group + "/" + Version
	mc.Kind = "MachineConfig"
	mc.Name = r.Name
	mc.Labels = map[string]string{RenderedForLabel: r.Pool}
	mc.Annotations = map[string]string{SourcesAnnotation: strings.Join(r.Sources, ",")}
	return mc, nil
}

// FromObject reads a rendered config back from its object, checking it as
// Render would.
func FromObject(mc MachineConfig) (*Rendered, error) {
	cfg, errs := parseConfig(mc)
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if _, err := parseKubelet(mc); err != nil {
		return nil, err
	}
	return &Rendered{Name: mc.Name, Pool: mc.Labels[RenderedForLabel], Config: cfg, KubeletConfig: mc.Spec.KubeletConfig}, nil
}

// PoolConfig reads pool's current rendered config (its
// status.configuration) through c, a client of the API's root (a
// clientset's Discovery().RESTClient()). It is nil, without an error, when
// the cluster has no such pool or the pool has rendered nothing yet (a
// cluster kiln made before the machine-config API).
func PoolConfig(ctx context.Context, c rest.Interface, pool string) (*Rendered, error) {
	if c == nil {
		return nil, nil // a fake clientset's, in tests
	}
	base := "/apis/" + Group + "/" + Version
	var p MachineConfigPool
	raw, err := c.Get().AbsPath(base, "machineconfigpools", pool).DoRaw(ctx)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err == nil {
		err = json.Unmarshal(raw, &p)
	}
	if err != nil {
		return nil, fmt.Errorf("MachineConfigPool %s: %w", pool, err)
	}
	if p.Status.Configuration == "" {
		return nil, nil
	}
	var mc MachineConfig
	raw, err = c.Get().AbsPath(base, "machineconfigs", p.Status.Configuration).DoRaw(ctx)
	if err == nil {
		err = json.Unmarshal(raw, &mc)
	}
	if err != nil {
		return nil, fmt.Errorf("MachineConfig %s (pool %s's config): %w", p.Status.Configuration, pool, err)
	}
	return FromObject(mc)
}
