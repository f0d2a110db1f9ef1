package scale

import (
	"context"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kiln-project/kiln/assets/release"
)

// etcdForNewMaster makes the etcd static pod a new master gets run the
// image the members run, and puts that image on the master, when it is
// not the one the install-time manifest names. A cluster upgraded since it
// was created runs a newer etcd than the node image its new machines boot
// from, and an older member cannot join it: once every member ran etcd
// 3.6, a 3.5 member refuses to start (docs/upgrade.md, "etcd 3.5 to 3.6").
// The image comes from its release's payload, as an upgrade loads it.
func (r *Runner) etcdForNewMaster(ctx context.Context, node string) error {
	running, err := r.runningEtcd(ctx, node)
	if err != nil || running == "" {
		return err
	}
	manifest, err := release.Retag([]byte(r.PKI.Manifest), release.Etcd, running)
	if err != nil {
		return fmt.Errorf("the masters' etcd static pod: %w", err)
	}
	if string(manifest) == r.PKI.Manifest {
		return nil
	}
	rel, err := release.WithImage(release.Etcd, running)
	if err != nil {
		return fmt.Errorf("the etcd members run %s: %w", running, err)
	}
	if r.Upgrader == nil {
		return fmt.Errorf("the etcd members run %s, newer than the node image of %s has, and platform %s cannot load images onto a machine",
			running, node, r.Cluster.Config.PlatformName())
	}
	if err := r.Upgrader.LoadRelease(ctx, r.Cluster.InfraID, node, rel.Kubernetes, []release.Component{release.Etcd}); err != nil {
		return fmt.Errorf("loading %s onto %s: %w", running, node, err)
	}
	r.PKI.Manifest = string(manifest)
	r.Log.Infof("etcd on %s runs %s, as the members do", node, running)
	return nil
}

// runningEtcd returns the image the etcd static pods of the masters but
// node run; "" when there is none. Members that run different images are
// an upgrade under way, which must end first: the new member would join
// at one of two versions.
func (r *Runner) runningEtcd(ctx context.Context, node string) (string, error) {
	pods, err := r.Kube.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "component=etcd,tier=control-plane"})
	if err != nil {
		return "", fmt.Errorf("the etcd members' pods: %w", err)
	}
	images := map[string][]string{}
	for _, p := range pods.Items {
		if p.Spec.NodeName == node {
			continue
		}
		for _, c := range p.Spec.Containers {
			if c.Name == string(release.Etcd) {
				images[c.Image] = append(images[c.Image], p.Spec.NodeName)
			}
		}
	}
	if len(images) > 1 {
		var runs []string
		for img, nodes := range images {
			slices.Sort(nodes)
			runs = append(runs, img+" on "+strings.Join(nodes, ", "))
		}
		slices.Sort(runs)
		return "", fmt.Errorf("the etcd members run different images (%s): an upgrade is under way; finish it with kiln upgrade cluster first", strings.Join(runs, "; "))
	}
	for img := range images {
		return img, nil
	}
	return "", nil
}
