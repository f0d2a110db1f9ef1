package inventory

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/netip"
	"regexp"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Where the inventory lives in the cluster.
const (
	// Namespace is the ConfigMap's namespace. Nodes cannot write
	// ConfigMaps in it.
	Namespace = "kube-system"
	// Name is the ConfigMap's name.
	Name = "kiln-machines"
	// Key is the ConfigMap's data key that holds the JSON document.
	Key = "machines.json"
)

// Machine roles.
const (
	RoleMaster = "master"
	RoleWorker = "worker"
)

// Machine is one master or worker as kiln created it.
type Machine struct {
	// Name is the machine's name, which is also its host name and its
	// Node's name.
	Name string `json:"name"`
	// Role is RoleMaster or RoleWorker.
	Role string `json:"role"`
	// Addresses are the addresses kiln assigned to the machine.
	Addresses []netip.Addr `json:"addresses"`
	// JoinTokenID is the public ID of the bootstrap token the machine
	// joins with when `kiln scale cluster` added it (never the token's
	// secret): kiln-csr-approver approves a node client certificate for
	// the machine's name only to that token, and never one for another
	// machine's name. Empty for the machines of the install, which join
	// with the install-time token.
	JoinTokenID string `json:"joinTokenID,omitempty"`
}

// tokenID is the shape of a bootstrap token's public ID.
var tokenID = regexp.MustCompile(`^[a-z0-9]{6}$`)

// Inventory is the document under Key: every machine of the cluster.
type Inventory struct {
	// Machines are the masters and workers, in the order they were added.
	Machines []Machine `json:"machines"`
}

// Parse decodes and validates a machines.json document; an unknown field
// is an error, so a misspelt edit is not silently ignored.
func Parse(data []byte) (*Inventory, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	inv := &Inventory{}
	if err := dec.Decode(inv); err != nil {
		return nil, fmt.Errorf("%s: %w", Key, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%s: data after the document", Key)
	}
	if err := inv.Validate().ToAggregate(); err != nil {
		return nil, fmt.Errorf("%s: %w", Key, err)
	}
	return inv, nil
}

// Validate reports every problem of the inventory with its field path: a
// name that is not a Node name or appears twice, an unknown role, a
// machine without addresses, an address that is invalid or held twice, a
// join token ID that is not one or is held twice.
func (inv *Inventory) Validate() field.ErrorList {
	var errs field.ErrorList
	names := map[string]bool{}
	addrs := map[netip.Addr]bool{}
	tokens := map[string]bool{}
	for i, m := range inv.Machines {
		p := field.NewPath("machines").Index(i)
		for _, msg := range validation.IsDNS1123Subdomain(m.Name) {
			errs = append(errs, field.Invalid(p.Child("name"), m.Name, msg))
		}
		if names[m.Name] {
			errs = append(errs, field.Duplicate(p.Child("name"), m.Name))
		}
		names[m.Name] = true
		if m.Role != RoleMaster && m.Role != RoleWorker {
			errs = append(errs, field.NotSupported(p.Child("role"), m.Role, []string{RoleMaster, RoleWorker}))
		}
		if len(m.Addresses) == 0 {
			errs = append(errs, field.Required(p.Child("addresses"), "a machine needs at least one address"))
		}
		for j, a := range m.Addresses {
			ap := p.Child("addresses").Index(j)
			switch {
			case !a.IsValid():
				errs = append(errs, field.Invalid(ap, a.String(), "not an IP address"))
			case addrs[a.Unmap()]:
				errs = append(errs, field.Duplicate(ap, a.String()))
			}
			addrs[a.Unmap()] = true
		}
		if id := m.JoinTokenID; id != "" {
			switch {
			case !tokenID.MatchString(id):
				errs = append(errs, field.Invalid(p.Child("joinTokenID"), id, "not a bootstrap token ID (6 characters of [a-z0-9])"))
			case tokens[id]:
				errs = append(errs, field.Duplicate(p.Child("joinTokenID"), id))
			}
			tokens[id] = true
		}
	}
	return errs
}

// JoinedWith returns the machine whose join token has the public ID id.
func (inv *Inventory) JoinedWith(id string) (Machine, bool) {
	i := slices.IndexFunc(inv.Machines, func(m Machine) bool { return id != "" && m.JoinTokenID == id })
	if i < 0 {
		return Machine{}, false
	}
	return inv.Machines[i], true
}

// Machine returns the machine called name.
func (inv *Inventory) Machine(name string) (Machine, bool) {
	i := slices.IndexFunc(inv.Machines, func(m Machine) bool { return m.Name == name })
	if i < 0 {
		return Machine{}, false
	}
	return inv.Machines[i], true
}

// Set adds m, or replaces the machine of the same name; it reports whether
// the inventory changed.
func (inv *Inventory) Set(m Machine) bool {
	i := slices.IndexFunc(inv.Machines, func(o Machine) bool { return o.Name == m.Name })
	if i < 0 {
		inv.Machines = append(inv.Machines, m)
		return true
	}
	if old := inv.Machines[i]; old.Role == m.Role && slices.Equal(old.Addresses, m.Addresses) && old.JoinTokenID == m.JoinTokenID {
		return false
	}
	inv.Machines[i] = m
	return true
}

// Remove removes the machine called name; it reports whether there was one.
func (inv *Inventory) Remove(name string) bool {
	n := len(inv.Machines)
	inv.Machines = slices.DeleteFunc(inv.Machines, func(m Machine) bool { return m.Name == name })
	return len(inv.Machines) != n
}

// Marshal validates the inventory and returns its machines.json document,
// one machine a line.
func (inv *Inventory) Marshal() ([]byte, error) {
	if err := inv.Validate().ToAggregate(); err != nil {
		return nil, fmt.Errorf("machine inventory: %w", err)
	}
	var b bytes.Buffer
	b.WriteString(`{"machines": [`)
	for i, m := range inv.Machines {
		line, err := json.Marshal(m)
		if err != nil {
			return nil, err
		}
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("\n  ")
		b.Write(line)
	}
	if len(inv.Machines) > 0 {
		b.WriteByte('\n')
	}
	b.WriteString("]}\n")
	return b.Bytes(), nil
}

// ConfigMap returns the inventory as ConfigMap Namespace/Name.
func (inv *Inventory) ConfigMap() (*corev1.ConfigMap, error) {
	data, err := inv.Marshal()
	if err != nil {
		return nil, err
	}
	return &corev1.ConfigMap{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: Name, Namespace: Namespace,
			Labels: map[string]string{"app.kubernetes.io/managed-by": "kiln"}},
		Data: map[string]string{Key: string(data)},
	}, nil
}

// FromConfigMap parses the inventory that cm holds.
func FromConfigMap(cm *corev1.ConfigMap) (*Inventory, error) {
	data, ok := cm.Data[Key]
	if !ok {
		return nil, fmt.Errorf("ConfigMap %s/%s has no %s", cm.Namespace, cm.Name, Key)
	}
	inv, err := Parse([]byte(data))
	if err != nil {
		return nil, fmt.Errorf("ConfigMap %s/%s: %w", cm.Namespace, cm.Name, err)
	}
	return inv, nil
}
