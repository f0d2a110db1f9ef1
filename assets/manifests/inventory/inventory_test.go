package inventory

import (
	"net/netip"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func addrs(s ...string) []netip.Addr {
	var out []netip.Addr
	for _, a := range s {
		out = append(out, netip.MustParseAddr(a))
	}
	return out
}

func TestRoundTrip(t *testing.T) {
	inv := &Inventory{Machines: []Machine{
		{Name: "demo-x-master-0", Role: RoleMaster, Addresses: addrs("10.66.0.11")},
		{Name: "demo-x-worker-0", Role: RoleWorker, Addresses: addrs("10.66.0.20")},
		{Name: "demo-x-worker-1", Role: RoleWorker, Addresses: addrs("10.66.0.21"), JoinTokenID: "abc123"},
	}}
	cm, err := inv.ConfigMap()
	if err != nil {
		t.Fatal(err)
	}
	if cm.Namespace != "kube-system" || cm.Name != "kiln-machines" || cm.Kind != "ConfigMap" {
		t.Errorf("ConfigMap %s %s/%s", cm.Kind, cm.Namespace, cm.Name)
	}
	want := `{"machines": [
  {"name":"demo-x-master-0","role":"master","addresses":["10.66.0.11"]},
  {"name":"demo-x-worker-0","role":"worker","addresses":["10.66.0.20"]},
  {"name":"demo-x-worker-1","role":"worker","addresses":["10.66.0.21"],"joinTokenID":"abc123"}
]}
`
	if cm.Data[Key] != want {
		t.Errorf("machines.json =\n%s\nwant\n%s", cm.Data[Key], want)
	}
	back, err := FromConfigMap(cm)
	if err != nil {
		t.Fatal(err)
	}
	if m, ok := back.Machine("demo-x-worker-0"); !ok || m.Role != RoleWorker || m.Addresses[0] != netip.MustParseAddr("10.66.0.20") {
		t.Errorf("Machine(worker) = %+v, %v", m, ok)
	}
	if m, ok := back.JoinedWith("abc123"); !ok || m.Name != "demo-x-worker-1" {
		t.Errorf("JoinedWith(abc123) = %+v, %v; want demo-x-worker-1", m, ok)
	}
	if m, ok := back.JoinedWith(""); ok {
		t.Errorf("JoinedWith(\"\") = %+v: the machines of the install have no join token", m)
	}
	empty, err := (&Inventory{}).Marshal()
	if err != nil || string(empty) != `{"machines": []}`+"\n" {
		t.Errorf("empty inventory = %s, %v; want an empty list", empty, err)
	}
	if _, err := FromConfigMap(&corev1.ConfigMap{}); err == nil || !strings.Contains(err.Error(), "has no machines.json") {
		t.Errorf("FromConfigMap without the key: %v", err)
	}
}

func TestSetRemove(t *testing.T) {
	inv := &Inventory{}
	w := Machine{Name: "w", Role: RoleWorker, Addresses: addrs("10.66.0.20")}
	if !inv.Set(w) || inv.Set(w) {
		t.Error("Set of a new machine must change the inventory, setting it again must not")
	}
	w.Addresses = addrs("10.66.0.21")
	if !inv.Set(w) || len(inv.Machines) != 1 || inv.Machines[0].Addresses[0] != w.Addresses[0] {
		t.Errorf("Set with a new address: %+v", inv.Machines)
	}
	w.JoinTokenID = "abc123"
	if !inv.Set(w) || inv.Set(w) || inv.Machines[0].JoinTokenID != "abc123" {
		t.Errorf("Set with a join token must change the inventory once: %+v", inv.Machines)
	}
	if !inv.Remove("w") || inv.Remove("w") || len(inv.Machines) != 0 {
		t.Errorf("Remove: %+v", inv.Machines)
	}
}

// TestParseRefuses checks that every problem is reported with its path:
// the approver leaves every CSR pending while the inventory is invalid.
func TestParseRefuses(t *testing.T) {
	tests := []struct {
		name, doc string
		want      []string // the errors' fields and types
	}{
		{name: "unknown field", doc: `{"machines":[],"extra":1}`, want: []string{`unknown field "extra"`}},
		{name: "trailing data", doc: `{"machines":[]} {}`, want: []string{"data after the document"}},
		{name: "bad address", doc: `{"machines":[{"name":"w","role":"worker","addresses":["10.66.0.300"]}]}`, want: []string{"10.66.0.300"}},
		{name: "bad join token ID", doc: `{"machines":[{"name":"w","role":"worker","addresses":["10.66.0.20"],"joinTokenID":"abc123.0123456789abcdef"}]}`,
			want: []string{`machines[0].joinTokenID: Invalid value: "abc123.0123456789abcdef"`}},
		{name: "join token ID twice", doc: `{"machines":[
			{"name":"w","role":"worker","addresses":["10.66.0.20"],"joinTokenID":"abc123"},
			{"name":"v","role":"worker","addresses":["10.66.0.21"],"joinTokenID":"abc123"}]}`,
			want: []string{`machines[1].joinTokenID: Duplicate value: "abc123"`}},
		{name: "every problem", doc: `{"machines":[
			{"name":"w","role":"worker","addresses":["10.66.0.20"]},
			{"name":"w","role":"boss","addresses":["10.66.0.20"]},
			{"name":"Not_A_Node","role":"master","addresses":[]}]}`,
			want: []string{
				"machines[1].name: Duplicate value",
				`machines[1].role: Unsupported value: "boss"`,
				`machines[1].addresses[0]: Duplicate value: "10.66.0.20"`,
				`machines[2].name: Invalid value: "Not_A_Node"`,
				"machines[2].addresses: Required value",
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.doc))
			if err == nil {
				t.Fatal("parsed")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
	inv := &Inventory{Machines: []Machine{{Name: "a", Role: RoleWorker, Addresses: addrs("10.0.0.1")}, {Name: "b", Role: RoleWorker, Addresses: addrs("::ffff:10.0.0.1")}}}
	errs := inv.Validate()
	if len(errs) != 1 || errs[0].Type != field.ErrorTypeDuplicate || errs[0].Field != "machines[1].addresses[0]" {
		t.Errorf("an IPv4-mapped copy of another machine's address: %v, want one duplicate", errs)
	}
	if _, err := inv.Marshal(); err == nil {
		t.Error("Marshal wrote an invalid inventory")
	}
}
