package install

import (
	"bytes"
	"strings"
	"testing"

	"github.com/kiln-project/kiln/assets/installconfig/types"
	"github.com/kiln-project/kiln/assets/installconfig/types/local"
	"github.com/kiln-project/kiln/platforms"
)

// The summary names the image registry and how to push to it, when the
// cluster has one.
func TestWriteCompleteNamesTheRegistry(t *testing.T) {
	off := false
	for _, tt := range []struct {
		name  string
		local *local.Platform
		want  string
	}{
		{"registry", &local.Platform{APIVIP: "10.66.110.1", RegistryPort: 5003}, "push to localhost:5003 from this host"},
		{"add-on off", &local.Platform{APIVIP: "10.66.110.1", RegistryPort: 5003, Addons: &local.Addons{Registry: &off}}, ""},
		{"platform none", nil, ""},
	} {
		c := &Cluster{Cluster: platforms.Cluster{Config: &types.Config{Platform: types.Platform{Local: tt.local}}}, Kubeconfig: "/d/auth/kubeconfig"}
		var out bytes.Buffer
		c.WriteComplete(&out)
		if got := strings.Contains(out.String(), "Image registry"); got != (tt.want != "") || !strings.Contains(out.String(), tt.want) {
			t.Errorf("%s: summary\n%s\nwant it to name the registry: %v (%q)", tt.name, out.String(), tt.want != "", tt.want)
		}
	}
}
