package scale

import (
	"context"
	"fmt"
	"net/netip"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kiln-project/kiln/assets/installconfig/types"
	"github.com/kiln-project/kiln/assets/installconfig/types/local"
	"github.com/kiln-project/kiln/assets/installconfig/types/machines"
	"github.com/kiln-project/kiln/assets/manifests/inventory"
	"github.com/kiln-project/kiln/cmd/cluster/etcdmembers"
)

// localConfig is a local cluster on 10.0.0.0/24: master i at 10.0.0.1<i>
// (offset 11+i), worker i at 10.0.0.2<i>; the install-config and its
// resolved machine network.
func localConfig() (*types.Config, types.Resolved) {
	return &types.Config{
		Networking: &types.Networking{MachineNetwork: []types.MachineNetworkEntry{{CIDR: "10.0.0.0/24"}}},
		Platform:   types.Platform{Local: &local.Platform{APIVIP: "10.0.0.1"}},
	}, types.Resolved{MachineNetwork: netip.MustParsePrefix("10.0.0.0/24")}
}

// journalInventory records every write of the inventory in j as
// "inventory <machine>=<address> ...".
func journalInventory(t *testing.T, j *journal, kube *fake.Clientset) {
	t.Helper()
	for _, verb := range []string{"create", "update"} {
		kube.PrependReactor(verb, "configmaps", func(a k8stesting.Action) (bool, runtime.Object, error) {
			cm := a.(k8stesting.CreateAction).GetObject().(*corev1.ConfigMap)
			inv, err := inventory.FromConfigMap(cm)
			if err != nil {
				t.Errorf("%s of an invalid inventory: %v", verb, err)
				return false, nil, nil
			}
			var ms []string
			for _, m := range inv.Machines {
				ms = append(ms, fmt.Sprintf("%s=%s", m.Name, m.Addresses[0]))
			}
			j.add("inventory %s", strings.Join(ms, " "))
			return false, nil, nil
		})
	}
}

// TestRunInventory checks that a machine is in the inventory before its
// machine is created and leaves it only after its machine is destroyed,
// with the address the platform's plan gives it; and that a cluster
// without an inventory (installed before kiln kept one) gets one.
func TestRunInventory(t *testing.T) {
	// Created or updated, the inventory goes through the same states.
	want := []string{
		"inventory master-0=10.0.0.11 worker-0=10.0.0.20 worker-1=10.0.0.21",
		"machines master-0,worker-0,worker-1",
		"drain worker-0",
		"machines master-0,worker-1",
		"inventory master-0=10.0.0.11 worker-1=10.0.0.21",
	}
	for _, existing := range []bool{true, false} {
		t.Run(fmt.Sprintf("existing inventory %v", existing), func(t *testing.T) {
			r, j, _ := newTestRunner(t, 1, 1)
			r.Cluster.Config, r.Cluster.Resolved = localConfig()
			kube := r.Kube.(*fake.Clientset)
			if existing {
				inv := &inventory.Inventory{}
				for _, n := range r.Cluster.Shape.All() {
					m, _, err := r.inventoryMachine(n)
					if err != nil {
						t.Fatal(err)
					}
					inv.Set(m)
				}
				cm, err := inv.ConfigMap()
				if err != nil {
					t.Fatal(err)
				}
				if _, err := kube.CoreV1().ConfigMaps(inventory.Namespace).Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			journalInventory(t, j, kube)
			p, err := MakePlan(infra, r.Cluster.Shape, Request{Masters: 1, Workers: 1, Remove: ws(0)}, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := r.Run(context.Background(), p); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(j.calls, want) {
				t.Errorf("calls:\n%s\nwant:\n%s", strings.Join(j.calls, "\n"), strings.Join(want, "\n"))
			}
		})
	}
}

// TestInventoryMasterReplace: a replaced master leaves the inventory after
// its old machine is destroyed and is back in it, at the same address,
// before its new machine is created; enrolling again changes nothing.
func TestInventoryMasterReplace(t *testing.T) {
	r, j, e := newTestRunner(t, 3, 0)
	r.Cluster.Config, r.Cluster.Resolved = localConfig()
	e.names[etcdmembers.PeerURL("10.0.0.11")] = infra + "-master-1"
	journalInventory(t, j, r.Kube.(*fake.Clientset))
	p, err := MakePlan(infra, r.Cluster.Shape, Request{Masters: 3, Replace: ms(1)}, nil, nil)
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
		// No inventory yet: the removal has nothing to remove from.
		"inventory master-0=10.0.0.11 master-1=10.0.0.12 master-2=10.0.0.13",
		"machines master-0,master-1,master-2",
	}
	if len(j.calls) < len(want) || !reflect.DeepEqual(j.calls[:len(want)], want) {
		t.Errorf("calls:\n%s\nwant them to start with:\n%s", strings.Join(j.calls, "\n"), strings.Join(want, "\n"))
	}
	writes := inventoryWrites(r.Kube.(*fake.Clientset))
	m, _ := clusterInventory(t, r).Machine(infra + "-master-1")
	if err := r.enroll(context.Background(), infra+"-master-1", m.JoinTokenID); err != nil {
		t.Fatal(err)
	}
	if after := inventoryWrites(r.Kube.(*fake.Clientset)); writes != 1 || after != writes {
		t.Errorf("inventory writes: %d in the run, %d after enrolling master-1 again; want 1 and no more", writes, after)
	}
}

// TestEnrollRecordsTheJoinTokenID: a machine a scale adds is in the
// inventory with the public ID of the token its config carries, and
// nothing of the token's secret is; the machines of the install have no
// token ID. A replaced master gets the ID of its new token.
func TestEnrollRecordsTheJoinTokenID(t *testing.T) {
	r, _, e := newTestRunner(t, 3, 1)
	r.Cluster.Config, r.Cluster.Resolved = localConfig()
	e.names[etcdmembers.PeerURL("10.0.0.11")] = infra + "-master-1"
	p, err := MakePlan(infra, r.Cluster.Shape, Request{Masters: 3, Workers: 2, Replace: ms(1)}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Run(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	joins := r.Machines.(*fakeScaler).joins // master-1's token, then worker-1's
	if len(joins) != 2 {
		t.Fatalf("%d machines joined with a token, want 2", len(joins))
	}
	inv := clusterInventory(t, r)
	want := map[string]string{"master-0": "", "master-1": joins[0], "master-2": "", "worker-0": "", "worker-1": joins[1]}
	for short, tok := range want {
		m, ok := inv.Machine(infra + "-" + short)
		id, secret, _ := strings.Cut(tok, ".")
		if !ok || m.JoinTokenID != id {
			t.Errorf("inventory entry of %s: %+v, want join token ID %q", short, m, id)
		}
		if secret != "" {
			cm, _ := r.Kube.CoreV1().ConfigMaps(inventory.Namespace).Get(context.Background(), inventory.Name, metav1.GetOptions{})
			if strings.Contains(cm.Data[inventory.Key], secret) {
				t.Errorf("the inventory holds the secret of %s's join token", short)
			}
		}
	}
}

// clusterInventory reads the inventory from r's cluster.
func clusterInventory(t *testing.T, r *Runner) *inventory.Inventory {
	t.Helper()
	cm, err := r.Kube.CoreV1().ConfigMaps(inventory.Namespace).Get(context.Background(), inventory.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	inv, err := inventory.FromConfigMap(cm)
	if err != nil {
		t.Fatal(err)
	}
	return inv
}

// TestEnrollRefusesABrokenInventory: an inventory that does not parse is
// not overwritten.
func TestEnrollRefusesABrokenInventory(t *testing.T) {
	r, _, _ := newTestRunner(t, 1, 1)
	r.Cluster.Config, r.Cluster.Resolved = localConfig()
	broken := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: inventory.Namespace, Name: inventory.Name},
		Data: map[string]string{inventory.Key: `{"machines": [{"name": "x"}]}`}}
	if _, err := r.Kube.CoreV1().ConfigMaps(inventory.Namespace).Create(context.Background(), broken, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	err := r.enroll(context.Background(), machines.Name(infra, machines.RoleWorker, 0), "")
	if err == nil || !strings.Contains(err.Error(), "machines[0].role") || !strings.Contains(err.Error(), "kubectl -n kube-system edit configmap kiln-machines") {
		t.Errorf("enroll into a broken inventory: %v", err)
	}
}

// inventoryWrites counts the ConfigMap creates and updates kube saw.
func inventoryWrites(kube *fake.Clientset) int {
	n := 0
	for _, a := range kube.Actions() {
		if a.GetResource().Resource == "configmaps" && (a.GetVerb() == "create" || a.GetVerb() == "update") {
			n++
		}
	}
	return n
}
