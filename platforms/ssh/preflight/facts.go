package preflight

import (
	_ "embed"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Script is the shell script that reports a host's facts: it changes
// nothing and prints one key=value per line (facts.sh).
//
//go:embed facts.sh
var Script string

// Facts is what a host's Script reported.
type Facts struct {
	// Clock is the host's time while the script ran.
	Clock time.Time
	// OSID and OSVersion are ID and VERSION_ID of /etc/os-release;
	// OSName is its PRETTY_NAME.
	OSID, OSVersion, OSName string
	// UID is the user the script ran as.
	UID int
	// PID1 is the name of the host's init process.
	PID1 string
	// Systemd is systemd's version, 0 when there is none.
	Systemd int
	// CgroupFS is the type of the file system at /sys/fs/cgroup:
	// cgroup2fs is the unified hierarchy (cgroup v2), tmpfs v1 or hybrid.
	CgroupFS string
	// CgroupControllers are the controllers cgroup v2 offers.
	CgroupControllers []string
	// BridgeNetfilter is true when /proc/sys/net/bridge exists, which
	// br_netfilter being loaded makes so.
	BridgeNetfilter bool
	// Kernel is the kernel's release.
	Kernel string
	// Modules maps a kernel module to loaded, builtin, loadable, missing
	// or unknown (the host's module lists cannot be read).
	Modules map[string]string
	// OverlayFS is true when the kernel offers overlay file systems.
	OverlayFS bool
	// Listening are the TCP ports something listens on.
	Listening map[int]bool
	// Swap is the number of swap areas in use.
	Swap int
	// Hostname and MachineID name the host.
	Hostname, MachineID string
	// NTP are the NTP clients that run (systemd-timesyncd, chrony, ...).
	NTP []string
	// TimeClients are the NTP clients of TimeClients the host has
	// installed, running or not, in that order.
	TimeClients []string
	// ChronySourceDirs are the sourcedir directives of chrony's
	// configuration.
	ChronySourceDirs []string
	// Tools are the programs kiln needs from the host's packages that it
	// has (requiredTools).
	Tools map[string]bool
	// Clashes are container runtimes or Kubernetes installs the host has
	// already: their programs' paths and their active units.
	Clashes []string
	// Payloads are kiln payloads the host carries already.
	Payloads []string
	// Memory is the host's memory and VarFree the free space under /var,
	// in bytes; -1 when unknown.
	Memory, VarFree int64
}

// ParseFacts reads what Script printed.
func ParseFacts(out []byte) (Facts, error) {
	f := Facts{Modules: map[string]string{}, Listening: map[int]bool{}, Tools: map[string]bool{}, Memory: -1, VarFree: -1}
	seen := map[string]bool{}
	for _, line := range strings.Split(string(out), "\n") {
		key, val, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		seen[key] = true
		var err error
		switch {
		case key == "clock":
			f.Clock, err = parseClock(val)
		case key == "os":
			parts := strings.SplitN(val, "/", 3)
			for len(parts) < 3 {
				parts = append(parts, "")
			}
			f.OSID, f.OSVersion, f.OSName = parts[0], parts[1], parts[2]
		case key == "uid":
			f.UID, err = strconv.Atoi(val)
		case key == "pid1":
			f.PID1 = val
		case key == "systemd":
			if val != "" {
				f.Systemd, err = strconv.Atoi(val)
			}
		case key == "cgroupfs":
			f.CgroupFS = val
		case key == "cgroupcontrollers":
			f.CgroupControllers = strings.Fields(val)
		case key == "bridgenf":
			f.BridgeNetfilter = val == "yes"
		case key == "kernel":
			f.Kernel = val
		case strings.HasPrefix(key, "module."):
			f.Modules[strings.TrimPrefix(key, "module.")] = val
		case key == "overlayfs":
			f.OverlayFS = val == "yes"
		case key == "listen":
			var port int64
			if port, err = strconv.ParseInt(val, 16, 32); err == nil {
				f.Listening[int(port)] = true
			}
		case key == "swap":
			f.Swap, err = strconv.Atoi(val)
		case key == "hostname":
			f.Hostname = val
		case key == "machineid":
			f.MachineID = val
		case key == "ntp":
			f.NTP = strings.Fields(val)
		case key == "timeclients":
			f.TimeClients = strings.Fields(val)
		case key == "chronysourcedirs":
			f.ChronySourceDirs = strings.Fields(val)
		case strings.HasPrefix(key, "tool."):
			f.Tools[strings.TrimPrefix(key, "tool.")] = val == "yes"
		case key == "clash":
			f.Clashes = append(f.Clashes, val)
		case key == "payload":
			f.Payloads = append(f.Payloads, val)
		case key == "memorykib":
			f.Memory, err = kib(val)
		case key == "varfreekib":
			f.VarFree, err = kib(val)
		}
		if err != nil {
			return Facts{}, fmt.Errorf("the preflight script printed %q: %w", line, err)
		}
	}
	for _, key := range []string{"clock", "uid", "hostname"} {
		if !seen[key] {
			return Facts{}, fmt.Errorf("the preflight script printed no %s (its output: %q)", key, brief(out))
		}
	}
	return f, nil
}

// parseClock reads date's %s.%N.
func parseClock(val string) (time.Time, error) {
	secs, frac, _ := strings.Cut(val, ".")
	s, err := strconv.ParseInt(secs, 10, 64)
	if err != nil {
		return time.Time{}, err
	}
	var ns int64
	if frac != "" {
		frac = (frac + "000000000")[:9]
		if ns, err = strconv.ParseInt(frac, 10, 64); err != nil {
			return time.Time{}, err
		}
	}
	return time.Unix(s, ns), nil
}

// kib reads a size in KiB as bytes; "" is unknown (-1).
func kib(val string) (int64, error) {
	if val == "" {
		return -1, nil
	}
	n, err := strconv.ParseInt(val, 10, 64)
	return n << 10, err
}

// brief is at most 200 bytes of out, for an error.
func brief(out []byte) string {
	if len(out) > 200 {
		return string(out[:200]) + "..."
	}
	return string(out)
}
