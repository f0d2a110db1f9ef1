package machine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/kiln-project/kiln/graph/atomicfile"
)

// EgressRecordFile is the host's record of the uplinks whose forwarding
// kiln turned on for networking.egress NAT, in the record directory: for
// each uplink (network namespace and interface), its value before kiln and
// the bridges that need it. The last bridge to go puts the value back.
const EgressRecordFile = "egress.json"

// egressLockFile serialises the clusters of one host changing the record.
const egressLockFile = "egress.lock"

// Egress is the host side of networking.egress NAT on the local platform:
// the machine network of a bridge is masqueraded out of the host's other
// interfaces by an nftables table of the bridge's own, the way Docker does
// for kind, and the bridge and the uplinks (the interfaces of the host's
// default routes) forward. Nothing from outside the bridge opens a
// connection to its machines, and an uplink whose forwarding kiln turned on
// forwards nothing new but to the bridge.
type Egress struct {
	// Run runs nft and ip.
	Run Runner
	// RecordDir holds EgressRecordFile, shared by every cluster of the host
	// (DefaultEgressRecordDir when empty).
	RecordDir string
	// ProcSys is /proc/sys (when empty); tests give a directory of their own.
	ProcSys string
	// NetNS names the host's network namespace in the record
	// (the link /proc/self/ns/net when empty): an interface name is
	// unique only inside one.
	NetNS string
}

// DefaultEgressRecordDir is where the record of the uplinks lives.
const DefaultEgressRecordDir = "/var/lib/kiln/host"

// EgressTable is the nftables table (family ip) of bridge's NAT.
func EgressTable(bridge string) string { return "kiln-egress-" + bridge }

// uplinkRecord is one uplink in EgressRecordFile.
type uplinkRecord struct {
	// Original is the uplink's forwarding value before kiln.
	Original string `json:"original"`
	// Bridges are the bridges whose NAT needs the uplink to forward.
	Bridges []string `json:"bridges"`
}

// egressRecord is EgressRecordFile: uplinks by "<netns> <interface>".
type egressRecord struct {
	Uplinks map[string]*uplinkRecord `json:"uplinks"`
}

func (e Egress) recordDir() string {
	if e.RecordDir == "" {
		return DefaultEgressRecordDir
	}
	return e.RecordDir
}

func (e Egress) procSys() string {
	if e.ProcSys == "" {
		return "/proc/sys"
	}
	return e.ProcSys
}

func (e Egress) netNS() (string, error) {
	if e.NetNS != "" {
		return e.NetNS, nil
	}
	return os.Readlink("/proc/self/ns/net")
}

// forwardingPath is the forwarding switch of interface dev.
func (e Egress) forwardingPath(dev string) string {
	return filepath.Join(e.procSys(), "net", "ipv4", "conf", dev, "forwarding")
}

// Enable sets up bridge's NAT of network: records the uplinks, turns on
// forwarding for the bridge and them, and loads the bridge's table. It is
// idempotent: a second call replaces the table and records nothing twice.
func (e Egress) Enable(ctx context.Context, bridge string, network netip.Prefix) error {
	if !validIfName(bridge) {
		return &InvalidError{fmt.Errorf("bridge name %q: must be 1-15 characters", bridge)}
	}
	if !network.IsValid() || !network.Addr().Is4() {
		return &InvalidError{fmt.Errorf("machine network %q: must be an IPv4 prefix", network)}
	}
	uplinks, err := defaultRouteDevs(ctx, e.Run)
	if err != nil {
		return err
	}
	uplinks = slices.DeleteFunc(uplinks, func(d string) bool { return d == bridge })
	for _, dev := range uplinks {
		if !validIfName(dev) {
			// Interface names may hold quotes; the ruleset quotes them.
			return fmt.Errorf("the host's default route leaves through %q, a name kiln cannot write into its nftables table", dev)
		}
	}
	ns, err := e.netNS()
	if err != nil {
		return err
	}
	var guarded []string
	err = e.withRecord(func(rec *egressRecord) error {
		for _, dev := range uplinks {
			key := ns + " " + dev
			u := rec.Uplinks[key]
			if u == nil {
				orig, err := os.ReadFile(e.forwardingPath(dev))
				if err != nil {
					return fmt.Errorf("forwarding of uplink %s: %w", dev, err)
				}
				u = &uplinkRecord{Original: strings.TrimSpace(string(orig))}
				rec.Uplinks[key] = u
			}
			if !slices.Contains(u.Bridges, bridge) {
				u.Bridges = append(u.Bridges, bridge)
			}
			if u.Original != "1" {
				guarded = append(guarded, dev)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	// The record is written before any switch is turned: a crash between
	// the two leaves a record that Disable undoes, never a change that no
	// record names.
	for _, dev := range append([]string{bridge}, uplinks...) {
		if err := os.WriteFile(e.forwardingPath(dev), []byte("1\n"), 0o644); err != nil {
			return fmt.Errorf("turning on forwarding of %s: %w", dev, err)
		}
	}
	return e.loadTable(ctx, bridge, EgressRuleset(bridge, network, guarded))
}

// EgressRuleset is the nft script of bridge's table: it replaces the table
// whole in one transaction. The machine network is masqueraded out of
// every interface but the bridge; nothing from outside the bridge opens a
// connection to its machines; an uplink in guarded (one kiln turned
// forwarding on for) forwards nothing new but to the bridge.
func EgressRuleset(bridge string, network netip.Prefix, guarded []string) string {
	t := EgressTable(bridge)
	var b strings.Builder
	fmt.Fprintf(&b, "table ip %s {}\ndelete table ip %s\ntable ip %s {\n", t, t, t)
	b.WriteString("\tchain postrouting {\n\t\ttype nat hook postrouting priority srcnat; policy accept;\n")
	fmt.Fprintf(&b, "\t\tip saddr %s oifname != %q masquerade\n\t}\n", network.Masked(), bridge)
	b.WriteString("\tchain forward {\n\t\ttype filter hook forward priority filter; policy accept;\n")
	fmt.Fprintf(&b, "\t\toifname %q iifname != %q ct state new drop\n", bridge, bridge)
	for _, dev := range guarded {
		fmt.Fprintf(&b, "\t\tiifname %q oifname != %q ct state new drop\n", dev, bridge)
	}
	b.WriteString("\t}\n}\n")
	return b.String()
}

// loadTable loads script with nft from a file of the record directory.
func (e Egress) loadTable(ctx context.Context, bridge, script string) error {
	if err := os.MkdirAll(e.recordDir(), 0o700); err != nil {
		return err
	}
	name := filepath.Join(e.recordDir(), EgressTable(bridge)+".nft")
	if err := atomicfile.Write(name, []byte(script), 0o600); err != nil {
		return err
	}
	if err := runQuiet(ctx, e.Run, []string{"nft", "-f", name}); err != nil {
		return fmt.Errorf("loading nftables table %s: %w", EgressTable(bridge), err)
	}
	return nil
}

// Enabled reports whether bridge's table is loaded: a host reboot
// empties nftables, and the network resource then sets it up again. A host
// without nft has no table.
func (e Egress) Enabled(ctx context.Context, bridge string) (bool, error) {
	out, err := e.Run.Run(ctx, "nft", "-j", "list", "tables", "ip")
	if errors.Is(err, exec.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	var tables struct {
		Nftables []struct {
			Table *struct {
				Name string `json:"name"`
			} `json:"table"`
		} `json:"nftables"`
	}
	if err := json.Unmarshal(out, &tables); err != nil {
		return false, fmt.Errorf("parsing nft list tables: %w", err)
	}
	for _, t := range tables.Nftables {
		if t.Table != nil && t.Table.Name == EgressTable(bridge) {
			return true, nil
		}
	}
	return false, nil
}

// Disable removes bridge's table and its claim on the uplinks; an uplink
// no bridge needs any more gets its forwarding value back. Nothing set up
// is fine.
func (e Egress) Disable(ctx context.Context, bridge string) error {
	if ok, err := e.Enabled(ctx, bridge); err != nil {
		return err
	} else if ok {
		if err := runQuiet(ctx, e.Run, []string{"nft", "delete", "table", "ip", EgressTable(bridge)}); err != nil {
			return fmt.Errorf("deleting nftables table %s: %w", EgressTable(bridge), err)
		}
	}
	if _, err := os.Lstat(filepath.Join(e.recordDir(), EgressRecordFile)); errors.Is(err, fs.ErrNotExist) {
		return nil // no cluster of the host ever had NAT: nothing to give back
	}
	ns, err := e.netNS()
	if err != nil {
		return err
	}
	err = e.withRecord(func(rec *egressRecord) error {
		var errs []error
		for key, u := range rec.Uplinks {
			u.Bridges = slices.DeleteFunc(u.Bridges, func(b string) bool { return b == bridge })
			uns, dev, _ := strings.Cut(key, " ")
			if len(u.Bridges) > 0 || uns != ns {
				continue
			}
			err := os.WriteFile(e.forwardingPath(dev), []byte(u.Original+"\n"), 0o644)
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, fmt.Errorf("restoring forwarding of %s: %w", dev, err))
				continue
			}
			delete(rec.Uplinks, key)
		}
		return errors.Join(errs...)
	})
	if err != nil {
		return err
	}
	if err := os.Remove(filepath.Join(e.recordDir(), EgressTable(bridge)+".nft")); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// withRecord runs change on the record under the host's lock and writes
// it back atomically, even when change fails halfway (what it did is then
// recorded); an empty record is removed.
func (e Egress) withRecord(change func(*egressRecord) error) error {
	dir := e.recordDir()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	unlock, err := atomicfile.Lock(dir, filepath.Join(dir, egressLockFile))
	if err != nil {
		return err
	}
	defer unlock()
	name := filepath.Join(dir, EgressRecordFile)
	rec := &egressRecord{}
	switch data, err := atomicfile.ReadFile(dir, name); {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return err
	default:
		if err := json.Unmarshal(data, rec); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	if rec.Uplinks == nil {
		rec.Uplinks = map[string]*uplinkRecord{}
	}
	cerr := change(rec)
	if len(rec.Uplinks) == 0 {
		if err := os.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return errors.Join(cerr, err)
		}
		return cerr
	}
	data, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.Write(name, append(data, '\n'), 0o600); err != nil {
		return errors.Join(cerr, err)
	}
	return cerr
}

// defaultRouteDevs returns the interfaces of the host's IPv4 default
// routes, sorted, each once.
func defaultRouteDevs(ctx context.Context, r Runner) ([]string, error) {
	out, err := r.Run(ctx, "ip", "-j", "-4", "route", "show", "default")
	if err != nil {
		return nil, err
	}
	var routes []struct {
		Dev string `json:"dev"`
	}
	if len(strings.TrimSpace(string(out))) > 0 {
		if err := json.Unmarshal(out, &routes); err != nil {
			return nil, fmt.Errorf("parsing ip route output: %w", err)
		}
	}
	var devs []string
	for _, rt := range routes {
		if rt.Dev != "" && !slices.Contains(devs, rt.Dev) {
			devs = append(devs, rt.Dev)
		}
	}
	sort.Strings(devs)
	return devs, nil
}
