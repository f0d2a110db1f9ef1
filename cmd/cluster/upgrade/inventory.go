package upgrade

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kiln-project/kiln/assets/release"
	"github.com/kiln-project/kiln/cmd/cluster/handover"
	"github.com/kiln-project/kiln/cmd/cluster/scale"
)

// Where Inventory finds the cluster's components.
const (
	// Namespace holds the control-plane pods and the add-ons.
	Namespace = "kube-system"
	// controlPlaneSelector selects the masters' static pods.
	controlPlaneSelector = "tier=control-plane"
	// componentLabel names a static pod's component.
	componentLabel = "component"
)

// Inventory reads the versions the cluster runs: each node's kubelet (as
// its status reports it), each master's control-plane components (the tag
// of their static pods' images; an etcd member's own answer overrides its
// image's), and which member leads etcd, all from o; then kube-proxy and
// CoreDNS (their workloads' images) from the API. A version it cannot read
// stays unknown (zero), for Healthy to name what is missing.
func Inventory(ctx context.Context, kube kubernetes.Interface, o Observed) (State, error) {
	s := State{Addons: map[Component]release.Version{}}
	for _, n := range o.Nodes {
		_, master := n.Labels[handover.ControlPlaneLabel]
		vs := map[Component]release.Version{Kubelet: parseOrZero(n.Status.NodeInfo.KubeletVersion)}
		s.Nodes = append(s.Nodes, Node{Name: n.Name, Master: master, Versions: vs})
	}
	for _, p := range o.ControlPlane {
		c := Component(p.Labels[componentLabel])
		n := s.node(p.Spec.NodeName)
		if n == nil || !slices.Contains(masterComponents, c) {
			continue
		}
		n.Versions[c] = imageVersion(p.Spec.Containers, string(c))
	}
	for _, h := range o.Etcd {
		if h.Status == nil {
			continue
		}
		if n := s.node(h.Member.Name); n != nil {
			n.Versions[Etcd] = parseOrZero(h.Status.Version)
		}
		for _, m := range o.Etcd {
			if m.Member.ID == h.Status.Leader && h.Status.Leader != 0 {
				s.EtcdLeader = m.Member.Name
			}
		}
	}
	ds, err := kube.AppsV1().DaemonSets(Namespace).Get(ctx, scale.KubeProxyDaemonSet, metav1.GetOptions{})
	if err != nil {
		return s, fmt.Errorf("reading the kube-proxy DaemonSet: %w", err)
	}
	s.Addons[KubeProxy] = imageVersion(ds.Spec.Template.Spec.Containers, scale.KubeProxyDaemonSet)
	dep, err := kube.AppsV1().Deployments(Namespace).Get(ctx, scale.CoreDNSDeployment, metav1.GetOptions{})
	if err != nil {
		return s, fmt.Errorf("reading the CoreDNS Deployment: %w", err)
	}
	s.Addons[CoreDNS] = imageVersion(dep.Spec.Template.Spec.Containers, scale.CoreDNSDeployment)
	return s, nil
}

// imageVersion is the version in the tag of the image of the container
// named name (else of the first container): "kiln.local/etcd:v3.5.35"
// gives 3.5.35. Zero when there is no container or its tag is not a
// version.
func imageVersion(cs []corev1.Container, name string) release.Version {
	img := scale.ContainerImage(cs, name)
	i := strings.LastIndex(img, ":")
	if i < 0 || strings.Contains(img[i:], "/") {
		return release.Version{}
	}
	return parseOrZero(img[i+1:])
}

func parseOrZero(s string) release.Version {
	v, err := release.ParseVersion(s)
	if err != nil {
		return release.Version{}
	}
	return v
}
