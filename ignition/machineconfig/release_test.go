package machineconfig

import (
	"strings"
	"testing"
)

func TestParseNodeRelease(t *testing.T) {
	r, err := ParseNodeRelease(`{"etcd":"v1.36.3","kubelet":"v1.35.4"}`)
	if err != nil || r["etcd"] != "v1.36.3" || r[Kubelet] != "v1.35.4" {
		t.Fatalf("ParseNodeRelease = %v, %v", r, err)
	}
	if got := r.With(Kubelet, "v1.36.3").String(); got != `{"etcd":"v1.36.3","kubelet":"v1.36.3"}` {
		t.Errorf("With = %s", got)
	}
	if r[Kubelet] != "v1.35.4" {
		t.Errorf("With changed its receiver: %v", r)
	}
	if r, err := ParseNodeRelease(""); err != nil || len(r) != 0 {
		t.Errorf(`ParseNodeRelease("") = %v, %v`, r, err)
	}
	_, err = ParseNodeRelease(`{"coredns":"v1.36.3","kubelet":"v9.9.9"}`)
	for _, want := range []string{"coredns is no component", "kubelet: "} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not say %q", err, want)
		}
	}
}
