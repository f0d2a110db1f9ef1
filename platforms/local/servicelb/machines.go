package servicelb

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
)

// Machines are the addresses kiln assigned to the cluster's machines when
// it laid them out (provision.Plan), by machine name, which is also the
// name of the machine's Node. They are the only addresses the controller
// proxies to: the addresses a Node reports in its status are its own word,
// and a Node that named 127.0.0.1 or one of the host's addresses there
// would aim this root process at the host.
type Machines struct {
	// Network is the machine network; every address is in it.
	Network netip.Prefix `json:"network"`
	// Host is the host's address on the bridge (the API VIP): never a
	// backend.
	Host netip.Addr `json:"host"`
	// Addresses maps each master and worker to its address.
	Addresses map[string]netip.Addr `json:"addresses"`
}

// Validate returns every problem of m, as written by kiln into the
// configuration file.
func (m Machines) Validate() error {
	var errs []error
	n := m.Network
	switch {
	case !n.IsValid() || !n.Addr().Is4() || n.Bits() > 30:
		errs = append(errs, fmt.Errorf("network: %s is not an IPv4 block with room for machines", n))
	case n.Addr().IsLoopback() || n.Addr().IsUnspecified() || n.Addr().IsLinkLocalUnicast() || n.Addr().IsMulticast():
		errs = append(errs, fmt.Errorf("network: %s cannot be a machine network", n))
	}
	if !m.Host.IsValid() || !n.Contains(m.Host) {
		errs = append(errs, fmt.Errorf("host: %s is not in network %s", m.Host, n))
	}
	if len(m.Addresses) == 0 {
		errs = append(errs, errors.New("addresses: required (the controller proxies to no other address)"))
	}
	owner := map[netip.Addr]string{}
	for _, name := range slices.Sorted(maps.Keys(m.Addresses)) {
		a := m.Addresses[name]
		if err := m.check(a); err != nil {
			errs = append(errs, fmt.Errorf("addresses[%s]: %w", name, err))
		}
		if o, dup := owner[a]; dup {
			errs = append(errs, fmt.Errorf("addresses[%s]: %s is also %s's", name, a, o))
		}
		owner[a] = name
	}
	return errors.Join(errs...)
}

// check tells why a is no machine address of m, or returns nil.
func (m Machines) check(a netip.Addr) error {
	n := m.Network.Masked()
	switch {
	case !a.IsValid() || !n.Contains(a):
		return fmt.Errorf("%s is not in the machine network %s", a, n)
	case a == n.Addr() || a == lastOf(n):
		return fmt.Errorf("%s is the machine network's own network or broadcast address", a)
	case a == m.Host:
		return fmt.Errorf("%s is the host's address", a)
	}
	return nil
}

// backend returns the address to proxy to for the Node name: its machine's
// address, when the Node is a machine and that address is a machine
// address outside pool.
func (m Machines) backend(name string, pool Pool) (netip.Addr, error) {
	a, ok := m.Addresses[name]
	if !ok {
		return netip.Addr{}, errors.New("it is not a machine of this cluster")
	}
	if err := m.check(a); err != nil {
		return netip.Addr{}, fmt.Errorf("its machine's address: %w", err)
	}
	if pool.Contains(a) {
		return netip.Addr{}, fmt.Errorf("its machine's address %s is in the LoadBalancer pool %s", a, pool)
	}
	return a, nil
}

// String lists the machines, for log lines: "none" when there is none.
func (m Machines) String() string {
	if len(m.Addresses) == 0 {
		return "none"
	}
	names := slices.Sorted(maps.Keys(m.Addresses))
	for i, n := range names {
		names[i] = n + "=" + m.Addresses[n].String()
	}
	return strings.Join(names, ", ")
}

// lastOf returns the last address of the IPv4 block p.
func lastOf(p netip.Prefix) netip.Addr {
	return addr4(be32(p.Masked().Addr()) | (uint32(1)<<(32-p.Bits()) - 1))
}

// machineFile reads the machines of a configuration file, again whenever
// the file changes: a scale rewrites the file, and the running controller
// follows without a restart.
type machineFile struct {
	path string

	mu    sync.Mutex
	stamp string
	last  Machines
}

// Machines returns the machines of the file. When the file cannot be read
// or is invalid it returns the machines last read, with the error.
func (f *machineFile) Machines() (Machines, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	st, err := os.Stat(f.path)
	if err != nil {
		return f.last, err
	}
	stamp := fmt.Sprintf("%d/%d", st.ModTime().UnixNano(), st.Size())
	if stamp == f.stamp {
		return f.last, nil
	}
	data, err := os.ReadFile(f.path)
	if err != nil {
		return f.last, err
	}
	var cfg Config
	if err := json.Unmarshal(data, &cfg); err != nil {
		return f.last, fmt.Errorf("%s: %w", f.path, err)
	}
	if err := cfg.Machines.Validate(); err != nil {
		return f.last, fmt.Errorf("%s: machines: %w", f.path, err)
	}
	f.stamp, f.last = stamp, cfg.Machines
	return f.last, nil
}
