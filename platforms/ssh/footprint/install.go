package footprint

import (
	"context"
	_ "embed"
	"encoding/base64"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/kiln-project/kiln/assets/release"
	"github.com/kiln-project/kiln/ignition/nodelayout"
	"github.com/kiln-project/kiln/platforms/nodeimage"
	"github.com/kiln-project/kiln/platforms/shellquote"
	"github.com/kiln-project/kiln/platforms/ssh/preflight"
)

var (
	//go:embed record.sh
	recordScript string
	//go:embed apply.sh
	applyScript string
	//go:embed reset.sh
	resetScript string
	//go:embed iptables-undo.awk
	iptablesUndo string
	//go:embed time.sh
	timeScript string
	// firewallFns defines record_firewall and reset_firewall, which
	// record.sh and reset.sh call.
	//go:embed firewall.sh
	firewallFns string
)

// ExtensionsDir is where systemd-sysext finds the node payload.
const ExtensionsDir = nodelayout.ExtensionsDir

// Host runs scripts as root on a host and copies directories onto it
// (remote.Client over SSH).
type Host interface {
	// RunScript runs script with /bin/sh as root on the host at address
	// and returns its output.
	RunScript(ctx context.Context, address, script string) ([]byte, error)
	// PushDir copies the directory src on this machine to dir on the host,
	// replacing it once whole; sent reports the bytes sent so far.
	PushDir(ctx context.Context, address, src, dir string, sent func(int64)) error
}

// Machine is one host to install onto.
type Machine struct {
	// Address is where the host answers SSH.
	Address string
	// Ignition is the machine's Ignition config.
	Ignition []byte
	// Env is the node environment (nodelayout.NodeEnvFile), KEY=value.
	Env map[string]string
	// Payload is the node payload's directory on this machine; its name
	// (nodeimage.SysextName) is the extension's name on the host.
	Payload string
	// APIProxy is the configuration (platforms/lb's JSON) of the
	// host's proxy to the API and the machine-config servers
	// (APIProxyUnit), or nil for none.
	APIProxy []byte
	// NTPServers are the time servers the host's NTP client is given
	// before anything else is installed (platform.ssh.ntpServers); its
	// time configuration is left alone when empty.
	NTPServers []string
	// Sent reports the payload's bytes sent so far, when not nil.
	Sent func(int64)
	// Note, when not nil, is told what the install did that its log
	// should show: the NTP client that took NTPServers, and how long the
	// clock took to synchronise.
	Note func(string)
}

// The files kiln gives a host's NTP client its time servers in: a source
// file of chrony's (in the sourcedir preflight found in chrony.conf), or
// a drop-in of systemd-timesyncd's.
const (
	ChronySourcesFile = preflight.ChronySourcesDir + "/kiln.sources"
	TimesyncdDropIn   = "/etc/systemd/timesyncd.conf.d/kiln.conf"
)

// TimesyncdFlag is the file systemd-timesyncd writes each time it accepts
// a server's answer.
const TimesyncdFlag = "/run/systemd/timesync/synchronized"

// TimeSyncWait is how long the install waits for a host's clock to be
// synchronised with the time servers it was given: chrony and timesyncd
// answer within seconds of a reachable server.
const TimeSyncWait = 2 * time.Minute

// Install records what the host at m.Address has, gives its NTP client
// m.NTPServers and waits until its clock is synchronised (when there are
// any), pushes the node payload, merges it, writes the Ignition config and
// node environment, and starts kiln-ignition.service, which applies the
// config and starts its units; it does not wait for them. A host
// installed before keeps its first record, so Install resumes after an
// interruption.
func Install(ctx context.Context, h Host, m Machine) error {
	fp, err := FromIgnition(m.Ignition)
	if err != nil {
		return err
	}
	env, err := envFile(m.Env)
	if err != nil {
		return err
	}
	extension := path.Join(ExtensionsDir, path.Base(m.Payload))
	if len(m.NTPServers) > 0 {
		fp.Paths = append(fp.Paths, ChronySourcesFile, TimesyncdDropIn)
	}
	if out, err := h.RunScript(ctx, m.Address, RecordScript(fp, extension)); err != nil {
		return fmt.Errorf("recording the host before the install: %w%s", err, quoted(out))
	}
	if len(m.NTPServers) > 0 {
		out, err := h.RunScript(ctx, m.Address, TimeScript(m.NTPServers))
		if err != nil {
			return fmt.Errorf("synchronising the host's clock with platform.ssh.ntpServers: %w%s", err, quoted(out))
		}
		if m.Note != nil {
			m.Note(strings.TrimSpace(string(out)))
		}
	}
	if err := h.PushDir(ctx, m.Address, m.Payload, extension, m.Sent); err != nil {
		return fmt.Errorf("pushing the node payload: %w", err)
	}
	if out, err := h.RunScript(ctx, m.Address, ApplyScript(m.Ignition, env, m.APIProxy)); err != nil {
		return fmt.Errorf("applying the Ignition config: %w%s", err, quoted(out))
	}
	return nil
}

// Reset takes away from the host at address everything Install put
// there, by the record Install left on it; a host without one is left
// alone. It can run again after an interruption.
func Reset(ctx context.Context, h Host, address string) error {
	if out, err := h.RunScript(ctx, address, ResetScript()); err != nil {
		return fmt.Errorf("resetting the host: %w%s", err, quoted(out))
	}
	return nil
}

// RecordScript is the script that records what a host has before
// installing fp and the extension directory extension onto it. The
// extension directories of every other release kiln pins are recorded
// too: an upgrade merges the payload of its release in place of the one
// installed (nodelayout.ReleasesDir), and the reset takes away whichever
// the host has then.
func RecordScript(fp Footprint, extension string) string {
	paths := slices.Concat(fp.Paths, StatePaths, []string{extension, nodelayout.IgnitionConfigFile, APIProxyUnitFile})
	for _, v := range release.Versions() {
		ext := path.Join(ExtensionsDir, nodeimage.SysextName(v))
		// And the copy a move across file systems builds there.
		paths = append(paths, ext, nodelayout.PayloadCopy(ext))
	}
	slices.Sort(paths)
	units := slices.Concat(PayloadUnits, fp.Units, []string{APIProxyUnit})
	slices.Sort(units)
	return assign(map[string]string{
		"rec":     RecordDir,
		"paths":   strings.Join(slices.Compact(paths), "\n"),
		"sysctls": strings.Join(Sysctls(), "\n"),
		"units":   strings.Join(slices.Compact(units), " "),
	}) + firewallFns + recordScript
}

// ApplyScript is the script that merges the payload, starts the API proxy
// with its configuration proxy (none when nil) and applies config with the
// node environment env (KEY=value lines).
func ApplyScript(config []byte, env string, proxy []byte) string {
	return assign(map[string]string{
		"proxy":           string(proxy),
		"proxy_file":      APIProxyConfigFile,
		"proxy_unit":      APIProxyUnit,
		"proxy_unit_file": APIProxyUnitFile,
		"proxy_unit_text": apiProxyUnitText(),
		"rec":             RecordDir,
		"config":          base64.StdEncoding.EncodeToString(config),
		"config_file":     nodelayout.IgnitionConfigFile,
		"env":             env,
		"env_file":        nodelayout.NodeEnvFile,
		"payload_units":   strings.Join(PayloadUnits, " "),
		"modules":         strings.Join(preflight.ModuleNames(), " "),
		"modules_file":    ModulesLoadFile,
	}) + putFileFn + applyScript
}

// TimeScript is the script that gives the host's NTP client the time
// servers servers and waits until its clock is synchronised with them.
func TimeScript(servers []string) string {
	return assign(map[string]string{
		"rec":            RecordDir,
		"servers":        strings.Join(servers, " "),
		"chrony_file":    ChronySourcesFile,
		"timesyncd_file": TimesyncdDropIn,
		"timesyncd_flag": TimesyncdFlag,
		"time_clients":   strings.Join(preflight.TimeClients(), " "),
		"wait":           fmt.Sprint(int(TimeSyncWait.Seconds())),
	}) + putFileFn + timeScript
}

// ResetScript is the script that resets a host by its record.
func ResetScript() string {
	return assign(map[string]string{
		"rec":                  RecordDir,
		"route_protocol":       nodelayout.PodRouteProtocol,
		"iptables_undo":        iptablesUndo,
		"kiln_binary":          nodelayout.KilnBinary,
		"machine_config_state": nodelayout.MachineConfigState,
	}) + unitsFn + firewallFns + resetScript
}

// assign returns shell assignments of vars, in name order.
func assign(vars map[string]string) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(vars)) {
		b.WriteString(k + "=" + shellquote.Quote(vars[k]) + "\n")
	}
	return b.String()
}

// envFile renders env as the node environment file, refusing a name an
// EnvironmentFile= cannot hold and a value with a line break.
func envFile(env map[string]string) (string, error) {
	for k, v := range env {
		if k == "" || strings.ContainsAny(k, "= \t\n\"'\\$#;") || strings.Contains(v, "\n") {
			return "", fmt.Errorf("node environment %q=%q: a name must be one plain word and a value one line", k, v)
		}
	}
	return nodelayout.EnvFile(env), nil
}

func quoted(out []byte) string {
	s := strings.TrimSpace(string(out))
	if s == "" {
		return ""
	}
	return ":\n" + s
}

// setAPIProxyScript replaces the proxy's configuration file with proxy,
// atomically, on a host that runs the proxy (a host without the file, or
// without kiln's record, is left alone); the proxy reloads a changed
// file by itself. Set before it: rec, proxy, proxy_file.
const setAPIProxyScript = `set -eu
if [ ! -e "$rec/recorded" ] || [ ! -f "$proxy_file" ] || [ -L "$proxy_file" ]; then
	echo "footprint: no API proxy configuration to replace"
	exit 0
fi
put_file "$proxy_file" 0644 "$proxy"
echo "footprint: API proxy configuration replaced"
`

// putFileFn is the shell function the scripts that write a file of kiln's
// share: put_file FILE MODE TEXT replaces FILE with TEXT atomically (a
// FILE.tmp beside it, renamed), removing FILE.tmp first, so that root
// never writes through a link planted there.
const putFileFn = `put_file() {
	rm -f "$1.tmp"
	printf '%s' "$3" >"$1.tmp"
	chmod "$2" "$1.tmp"
	mv -f "$1.tmp" "$1"
}
`

// SetAPIProxyScript is the script that gives the host's API proxy the
// configuration proxy.
func SetAPIProxyScript(proxy []byte) string {
	return assign(map[string]string{"rec": RecordDir, "proxy": string(proxy), "proxy_file": APIProxyConfigFile}) + putFileFn + setAPIProxyScript
}

// SetAPIProxy gives the API proxy of the host at address the
// configuration proxy (the backends once the bootstrap host is gone).
func SetAPIProxy(ctx context.Context, h Host, address string, proxy []byte) error {
	if out, err := h.RunScript(ctx, address, SetAPIProxyScript(proxy)); err != nil {
		return fmt.Errorf("replacing the API proxy's configuration: %w%s", err, quoted(out))
	}
	return nil
}
