package machine

import (
	"context"
	"errors"
	"slices"
	"testing"
)

const ipShow = "ip -json -details addr show"

func TestEnsureBridge(t *testing.T) {
	tests := []struct {
		name    string
		links   string
		cidr    string
		want    []string
		wantErr string // "", "host" or "invalid" (an InvalidError)
	}{
		{"absent", `[{"ifname":"lo","linkinfo":null,"addr_info":[]}]`, "10.66.0.1/24", []string{
			ipShow,
			"ip link add name kiln0 type bridge stp_state 0",
			"ip addr add 10.66.0.1/24 dev kiln0",
			"ip link set dev kiln0 up",
			"ip route replace unreachable 10.66.0.0/24 metric 9999",
		}, ""},
		{"present with address", `[{"ifname":"kiln0","linkinfo":{"info_kind":"bridge"},"addr_info":[{"family":"inet","local":"10.66.0.1","prefixlen":24}]}]`,
			"10.66.0.1/24", []string{ipShow, "ip link set dev kiln0 up", "ip route replace unreachable 10.66.0.0/24 metric 9999"}, ""},
		{"present, other prefix", `[{"ifname":"kiln0","linkinfo":{"info_kind":"bridge"},"addr_info":[{"family":"inet","local":"10.66.0.1","prefixlen":16}]}]`,
			"10.66.0.1/24", []string{ipShow, "ip addr add 10.66.0.1/24 dev kiln0", "ip link set dev kiln0 up", "ip route replace unreachable 10.66.0.0/24 metric 9999"}, ""},
		{"not a bridge", `[{"ifname":"kiln0","linkinfo":{"info_kind":"veth"},"addr_info":[]}]`,
			"10.66.0.1/24", []string{ipShow}, "host"},
		{"bad address", `[]`, "10.66.0.1", nil, "invalid"},
		{"ipv6", `[]`, "fd00::1/64", nil, "invalid"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &fakeRunner{outputs: map[string]string{ipShow: tt.links}}
			err := EnsureBridge(context.Background(), r, "kiln0", tt.cidr)
			if tt.wantErr != "" {
				invalid := errors.As(err, new(*InvalidError))
				if err == nil || invalid != (tt.wantErr == "invalid") {
					t.Errorf("err = %v (InvalidError %v), want a %s error", err, invalid, tt.wantErr)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if got := joined(r.calls); !slices.Equal(got, tt.want) {
				t.Errorf("commands =\n%q\nwant\n%q", got, tt.want)
			}
		})
	}
}

func TestEnsureBridgeCommandFails(t *testing.T) {
	r := &fakeRunner{outputs: map[string]string{ipShow: `[]`},
		errs: map[string]error{"ip link add name kiln0 type bridge stp_state 0": &CommandError{ExitCode: 2, Err: errors.New("exit status 2")}}}
	err := EnsureBridge(context.Background(), r, "kiln0", "10.66.0.1/24")
	var ce *CommandError
	if !errors.As(err, &ce) {
		t.Errorf("err = %v", err)
	}
	if len(r.calls) != 2 {
		t.Errorf("went on after a failure: %q", joined(r.calls))
	}
}

func TestDeleteBridge(t *testing.T) {
	tests := []struct {
		name    string
		links   string
		want    []string
		wantErr bool
	}{
		{"present", `[{"ifname":"kiln0","linkinfo":{"info_kind":"bridge"}}]`, []string{ipShow, "ip link delete dev kiln0"}, false},
		{"present with its network held", `[{"ifname":"kiln0","linkinfo":{"info_kind":"bridge"},"addr_info":[{"family":"inet","local":"10.66.0.1","prefixlen":24},{"family":"inet6","local":"fe80::1","prefixlen":64}]}]`,
			[]string{ipShow, "ip route del unreachable 10.66.0.0/24 metric 9999", "ip link delete dev kiln0"}, false},
		{"absent", `[{"ifname":"eth0"}]`, []string{ipShow}, false},
		{"not a bridge", `[{"ifname":"kiln0","linkinfo":{"info_kind":"dummy"}}]`, []string{ipShow}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &fakeRunner{outputs: map[string]string{ipShow: tt.links}}
			err := DeleteBridge(context.Background(), r, "kiln0")
			if (err != nil) != tt.wantErr {
				t.Errorf("err = %v", err)
			}
			if got := joined(r.calls); !slices.Equal(got, tt.want) {
				t.Errorf("commands = %q, want %q", got, tt.want)
			}
		})
	}
}
