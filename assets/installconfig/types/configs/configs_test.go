package configs

import (
	"slices"
	"testing"
)

func TestRegistry(t *testing.T) {
	if got := Names(); !slices.Equal(got, []string{"local", "none", "ssh"}) {
		t.Errorf("Names() = %q", got)
	}
	if Default() != "local" {
		t.Errorf("Default() = %q, want the first platform", Default())
	}
	if p, ok := Get("none"); !ok || p.Name() != "none" {
		t.Errorf("Get(none) = %v, %v", p, ok)
	}
	if _, ok := Get("aws"); ok {
		t.Error("Get(aws) found a platform kiln does not implement")
	}
	// Only a platform whose machine addresses follow from the
	// install-config assigns them (the machine inventory lists them).
	for name, want := range map[string]bool{"local": true, "none": false, "ssh": true} {
		p, _ := Get(name)
		if _, ok := p.(MachineAddresser); ok != want {
			t.Errorf("%s is a MachineAddresser: %v, want %v", name, ok, want)
		}
	}
}
