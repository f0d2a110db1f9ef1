package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/kiln-project/kiln/platforms/ssh/footprint"
)

// ownerChronyScript is how the owner of a test host runs chrony: the test
// hosts are containers sharing this machine's kernel clock, which none of
// them may set (chrony.service's ConditionCapability=CAP_SYS_TIME keeps
// it from starting there), so chrony runs as on a container host: with
// -x, measuring the clock against its servers and reporting its
// synchronisation without setting it. Enabled and started before kiln's
// record, so kiln finds it running with the host's own configuration.
const ownerChronyScript = `set -e
mkdir -p /etc/systemd/system/chrony.service.d
printf '[Unit]\nConditionCapability=\n' >/etc/systemd/system/chrony.service.d/owner-container.conf
printf 'DAEMON_OPTS="-F 1 -x"\n' >/etc/default/chrony
systemctl daemon-reload
systemctl enable --quiet chrony.service
systemctl restart chrony.service
`

// assertTimeSynced checks that chrony on each of hosts has the LAN's time
// server, server, in kiln's sources file and synchronises with it (its
// selected source, "^*").
func assertTimeSynced(ctx context.Context, t *testing.T, f *sshFleet, hosts []sshHost, server string) {
	t.Helper()
	for _, h := range hosts {
		out, err := f.Client.RunScript(ctx, h.Address, "cat "+footprint.ChronySourcesFile+"; chronyc -n sources")
		if err != nil || !strings.Contains(string(out), "server "+server+" iburst prefer\n") || !selected(string(out), server) {
			t.Errorf("%s does not keep time with %s, the LAN's time server (%v):\n%s", h.Name, server, err, out)
		}
		// From chronyd's last start (kiln's restart) to its choice of
		// the server, by its journal.
		took, _ := f.Client.RunScript(ctx, h.Address, `journalctl -u chrony.service -o short-unix --no-pager |
	awk '/chronyd version/ { s = $1; e = "" } /Selected source `+server+`/ && e == "" { e = $1 } END { if (s != "" && e != "") printf "%.1f s", e - s }'`)
		t.Logf("MEASURE %s's chrony chose the LAN's time server %s after it was restarted: %s", h.Name, server, took)
	}
}

// selected reports whether chronyc sources lists server as its selected
// source.
func selected(sources, server string) bool {
	for _, l := range strings.Split(sources, "\n") {
		if f := strings.Fields(l); len(f) > 1 && f[0] == "^*" && f[1] == server {
			return true
		}
	}
	return false
}

// assertTimeGivenBack checks that chrony on each of hosts runs again with
// its owner's configuration alone after the reset: the LAN's time server
// is no source of it any more.
func assertTimeGivenBack(ctx context.Context, t *testing.T, f *sshFleet, hosts []sshHost, server string) {
	t.Helper()
	for _, h := range hosts {
		waitFor(t, ctx, time.Minute, h.Name+"'s chrony without kiln's time server", func() (bool, string) {
			out, err := f.Client.RunScript(ctx, h.Address, "systemctl is-active chrony.service; chronyc -n sources")
			return err == nil && strings.HasPrefix(string(out), "active\n") && !strings.Contains(string(out), server), string(out)
		})
	}
}
