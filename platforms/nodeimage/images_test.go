package nodeimage

import (
	"slices"
	"testing"

	"github.com/kiln-project/kiln/assets/release"
)

// TestImageTools: the images whose programs write netfilter rules carry
// the tools they run; kube-router's also ipset, which it runs for every
// policy sync.
func TestImageTools(t *testing.T) {
	for _, spec := range release.Default().Images() {
		tools := imageTools(spec.Component)
		switch spec.Component {
		case release.KubeProxy:
			for _, want := range []string{"iptables-restore", "conntrack", "nft"} {
				if !slices.Contains(tools, want) {
					t.Errorf("kube-proxy's image lacks %s: %v", want, tools)
				}
			}
		case release.KubeRouter:
			for _, want := range []string{"iptables-save", "iptables-restore", "ipset"} {
				if !slices.Contains(tools, want) {
					t.Errorf("kube-router's image lacks %s: %v", want, tools)
				}
			}
		default:
			if len(tools) > 0 {
				t.Errorf("%s's image gets tools %v", spec.Component, tools)
			}
		}
	}
}
