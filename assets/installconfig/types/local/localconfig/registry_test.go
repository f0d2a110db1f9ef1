package localconfig

import (
	"bufio"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kiln-project/kiln/assets/installconfig/types"
	"github.com/kiln-project/kiln/assets/installconfig/types/local"
)

func TestParseListening(t *testing.T) {
	// Listening on 127.0.0.1:5001 and [::]:6443; a connection from port
	// 5002 (state 01, ESTABLISHED) is not a listener.
	const table = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n" +
		"   0: 0100007F:1389 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1\n" +
		"   1: 0100007F:138A 0100007F:1389 01 00000000:00000000 00:00000000 00000000     0        0 2 1\n" +
		"   2: 00000000000000000000000000000000:192B 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000 0 0 3 1\n"
	ports := map[uint16]bool{}
	if err := parseListening(bufio.NewScanner(strings.NewReader(table)), ports); err != nil {
		t.Fatal(err)
	}
	if len(ports) != 2 || !ports[5001] || !ports[6443] {
		t.Errorf("listening ports = %v, want 5001 and 6443", ports)
	}
	if err := parseListening(bufio.NewScanner(strings.NewReader("h\n 0: 0100007F:XYZ 0:0 0A\n")), map[uint16]bool{}); err == nil {
		t.Error("a garbled table parsed")
	}
}

func TestReadListeningPortsOnThisHost(t *testing.T) {
	if _, err := ReadListeningPorts(); err != nil {
		t.Fatal(err)
	}
}

// The registry's default port skips what the host listens on; an explicit
// port is kept, and none is set when the add-on is off.
func TestRegistryPortDefault(t *testing.T) {
	off := false
	listening := func(ports ...uint16) func() (map[uint16]bool, error) {
		return func() (map[uint16]bool, error) {
			m := map[uint16]bool{}
			for _, p := range ports {
				m[p] = true
			}
			return m, nil
		}
	}
	tests := []struct {
		name string
		l    local.Platform
		used func() (map[uint16]bool, error)
		want int32
		cidr string
	}{
		{"free host", local.Platform{}, listening(), 5001, ""},
		{"another cluster's registry on 5001", local.Platform{}, listening(5001, 5003), 5002, ""},
		{"no reader", local.Platform{}, nil, 5001, ""},
		{"explicit", local.Platform{RegistryPort: 5001}, listening(5001), 5001, ""},
		{"add-on off", local.Platform{Addons: &local.Addons{Registry: &off}}, listening(), 0, ""},
		// Two clusters created at once, neither listening yet: their
		// machine networks set them apart.
		{"machine network 10.66.101.0/24", local.Platform{}, listening(), 5102, "10.66.101.0/24"},
		{"machine network 10.66.102.0/24", local.Platform{}, listening(), 5103, "10.66.102.0/24"},
		{"taken, the next", local.Platform{}, listening(5103), 5104, "10.66.102.0/24"},
		{"wider network", local.Platform{}, listening(), 5001, "10.64.0.0/12"},
	}
	for _, tt := range tests {
		l := tt.l
		c := &types.Config{Networking: &types.Networking{}, Platform: types.Platform{Local: &l}}
		if tt.cidr != "" {
			c.Networking.MachineNetwork = []types.MachineNetworkEntry{{CIDR: tt.cidr}}
		}
		(&Config{ListeningPorts: tt.used}).SetDefaults(c)
		if l.RegistryPort != tt.want {
			t.Errorf("%s: registryPort = %d, want %d", tt.name, l.RegistryPort, tt.want)
		}
	}
}

func TestValidateRegistryPort(t *testing.T) {
	tests := []struct {
		port int32
		bad  bool
	}{{0, false}, {5001, false}, {65535, false}, {-1, true}, {65536, true}, {6443, true}, {22623, true}}
	for _, tt := range tests {
		c := &types.Config{
			Networking: &types.Networking{MachineNetwork: []types.MachineNetworkEntry{{CIDR: "10.66.110.0/24"}}},
			Platform:   types.Platform{Local: &local.Platform{APIVIP: "10.66.110.1", RegistryPort: tt.port}},
		}
		errs := (&Config{}).Validate(c, field.NewPath("platform", "local"))
		if !tt.bad {
			if len(errs) != 0 {
				t.Errorf("port %d: errors %v, want none", tt.port, errs)
			}
			continue
		}
		if len(errs) != 1 || errs[0].Type != field.ErrorTypeInvalid || errs[0].Field != "platform.local.registryPort" || errs[0].BadValue != tt.port {
			t.Errorf("port %d: errors %v, want one invalid platform.local.registryPort", tt.port, errs)
		}
	}
}
