package manifests

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/kiln-project/kiln/graph"
)

//go:generate go run ./internal/metallbcrds

var _ graph.WritableAsset = (*MetalLB)(nil)

// The MetalLB add-on's templates: upstream's CRDs (generated), then
// kiln's objects, in the order bootkube applies them.
const (
	metalLBCRDsTemplate = "cluster/18-metallb-crds.yaml"
	metalLBTemplate     = "cluster/18-metallb.yaml"
)

// The Service whose address is the API VIP that kiln keeps
// (18-metallb.yaml), and the namespace where MetalLB records which node
// announces an address (its ServiceL2Status objects): kiln scale moves
// the VIP off a master it removes, the tests find who holds it.
const (
	APIVIPNamespace, APIVIPService = "kube-system", "kiln-api"
	MetalLBNamespace               = "metallb-system"
)

// metalLBMemberlistPath is the Secret of the speakers' memberlist key,
// applied after the namespace it lives in.
const metalLBMemberlistPath = ManifestsDir + "/19-metallb-memberlist.yaml"

// MetalLB is manifests/18-metallb-crds.yaml and manifests/18-metallb.yaml:
// MetalLB's controller and speaker (layer 2 mode, without webhooks), an
// IPAddressPool of the platform's load balancer addresses and an
// L2Advertisement of it; and manifests/19-metallb-memberlist.yaml, the
// Secret memberlist with the key that encrypts the speakers' gossip (0600,
// never logged). kiln makes the key, as MetalLB's controller would at its
// first start: the speakers, which cannot start without it, then start
// with their node instead of waiting for the controller's pod, which needs
// a schedulable node (kubelet's backoff made that minutes). It holds no
// file unless the platform gives addresses to an in-cluster load balancer
// (platform.ssh.loadBalancerIPs).
type MetalLB struct{ objects }

// ID implements graph.Asset.
func (*MetalLB) ID() string { return "manifests/metallb" }

// Name implements graph.Asset.
func (*MetalLB) Name() string { return "MetalLB manifests" }

// Dependencies implements graph.Asset.
func (*MetalLB) Dependencies() []graph.Asset { return valuesOnly() }

// Generate implements graph.Asset.
func (m *MetalLB) Generate(_ context.Context, p graph.Parents) error {
	v := &Values{}
	if err := p.Get(v); err != nil {
		return err
	}
	m.FileList = nil
	if !v.Addons.MetalLB() {
		return nil
	}
	if err := m.render(ManifestsDir, v, metalLBCRDsTemplate, metalLBTemplate); err != nil {
		return err
	}
	secret, err := memberlistSecret()
	if err != nil {
		return err
	}
	m.FileList = append(m.FileList, &graph.File{Path: metalLBMemberlistPath, Data: secret, Mode: 0o600})
	return nil
}

// memberlistSecret returns the Secret metallb-system/memberlist with a new
// random key, as MetalLB's controller makes it (128 bits, base64; the
// speakers hash it into memberlist's AES key).
func memberlistSecret() ([]byte, error) {
	key := make([]byte, 16)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("memberlist key: %w", err)
	}
	return yaml.Marshal(&corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: "memberlist", Namespace: "metallb-system"},
		Data:       map[string][]byte{"secretkey": []byte(base64.RawStdEncoding.EncodeToString(key))},
	})
}

// Load implements graph.WritableAsset.
func (m *MetalLB) Load(f graph.FileFetcher) (bool, error) {
	found, err := m.load(f, append(targetPaths(ManifestsDir, []string{metalLBCRDsTemplate, metalLBTemplate}), metalLBMemberlistPath), CheckObjects)
	for _, file := range m.FileList {
		if file.Path == metalLBMemberlistPath {
			file.Mode = 0o600
		}
	}
	return found, err
}
