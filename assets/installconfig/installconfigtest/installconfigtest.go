// Package installconfigtest builds install-config assets for tests of the
// assets that depend on it, without parsing or defaulting.
package installconfigtest

import (
	"github.com/kiln-project/kiln/assets/installconfig"
	"github.com/kiln-project/kiln/assets/installconfig/types"
	"github.com/kiln-project/kiln/assets/installconfig/types/local"
	"github.com/kiln-project/kiln/assets/release"
)

// Local returns the install-config of cluster "demo" in example.test on the
// local platform with API VIP vip, or without one when vip is empty, at
// the default release, resolved as a state file's would be.
func Local(vip string) *installconfig.InstallConfig {
	ic := &installconfig.InstallConfig{Config: &types.Config{
		APIVersion:        types.APIVersion,
		Metadata:          types.Metadata{Name: "demo"},
		BaseDomain:        "example.test",
		KubernetesVersion: release.Default().Kubernetes,
		Networking: &types.Networking{
			MachineNetwork: []types.MachineNetworkEntry{{CIDR: "10.66.0.0/24"}},
			ClusterNetwork: []types.ClusterNetworkEntry{{CIDR: "10.128.0.0/14", HostPrefix: 23}},
			ServiceNetwork: []string{"172.30.0.0/16"},
		},
		Platform: types.Platform{Local: &local.Platform{APIVIP: vip}},
	}}
	if err := ic.CheckState(); err != nil {
		panic(err)
	}
	if _, err := ic.Resolved(); err != nil {
		panic(err)
	}
	return ic
}
