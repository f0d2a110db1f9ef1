package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kiln-project/kiln/platforms/netroute"
)

// TestMain runs the end-to-end suite under the stray-packet guard
// (test/guard.sh): an nftables table of its own drops and counts every
// packet from or to a cluster, pod, service or test network that crosses
// this host's default-route interface, for as long as the suite runs. A
// suite that passed fails when the guard counted any, naming the count and
// the first destinations. KILN_E2E_GUARD=0 runs the suite without it (a
// loud line says so).
func TestMain(m *testing.M) {
	os.Exit(guarded(m))
}

func guarded(m *testing.M) int {
	if s := worldServersFromEnv(); s != (worldServers{}) {
		serveWorld(s) // the simulated world's servers (world_test.go)
	}
	if os.Getenv("KILN_E2E") != "1" {
		return m.Run()
	}
	if os.Getenv("KILN_E2E_GUARD") == "0" {
		fmt.Println("SKIP stray-packet guard: KILN_E2E_GUARD=0 (nothing counts packets leaving through the default route)")
		return m.Run()
	}
	script, err := filepath.Abs(filepath.Join("..", "guard.sh"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	table := fmt.Sprintf("kiln_guard_e2e_%d", os.Getpid())
	guard := func(verb string) (string, error) {
		cmd := exec.Command(script, verb)
		cmd.Env = append(os.Environ(), "KILN_GUARD_TABLE="+table)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := guard("start"); err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: the stray-packet guard did not start: %v\n%s", err, out)
		return 1
	}
	code := m.Run()
	out, err := guard("check")
	fmt.Print(out)
	if stopOut, err := guard("stop"); err != nil {
		fmt.Fprintf(os.Stderr, "the stray-packet guard's table %s was not removed: %v\n%s", table, err, stopOut)
	}
	if err != nil {
		fmt.Println("FAIL: packets of the clusters or test networks crossed the host's default-route interface (test/guard.sh; docs/security.md, \"Addresses kiln dials\")")
		if code == 0 {
			code = 1
		}
	}
	return code
}

// clusterDial opens the end-to-end helpers' connections to a cluster's or
// a test host's address (API clients, probes, monitors), refusing, with
// nothing sent, an address whose route would leave through one of this
// host's default-route interfaces: a helper still probing a cluster whose
// bridge is gone gets an error instead of the guard counting its packets.
func clusterDial(ctx context.Context, network, address string) (net.Conn, error) {
	return netroute.Dialer{Policy: netroute.PolicyFunc(offUplinks)}.DialContext(ctx, network, address)
}

// offUplinks allows addr unless the kernel would send it through an
// interface that holds an IPv4 default route (/proc/net/route).
func offUplinks(addr netip.Addr) error {
	r, err := netroute.Lookup(addr)
	if err != nil {
		return err
	}
	data, err := os.ReadFile("/proc/net/route")
	if err != nil {
		return err
	}
	for _, line := range strings.Split(string(data), "\n")[1:] {
		// Iface Destination Gateway Flags RefCnt Use Metric Mask ...
		f := strings.Fields(line)
		if len(f) >= 8 && f[1] == "00000000" && f[7] == "00000000" && f[0] == r.Interface {
			return &netroute.UnreachableError{Addr: addr, Why: "its route leaves through " + r.Interface + ", which holds this host's default route"}
		}
	}
	return nil
}

// clusterTransport is an HTTP transport of the helpers: no kept-alive
// connections (each probe reaches a fresh backend), every connection
// through clusterDial.
func clusterTransport() *http.Transport {
	return &http.Transport{DisableKeepAlives: true, DialContext: clusterDial}
}
