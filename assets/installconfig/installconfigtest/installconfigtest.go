// Package installconfigtest builds install-config assets for tests of the
// assets that depend on it, without parsing or defaulting.
package installconfigtest

import (
	"github.com/kiln-project/kiln/assets/installconfig"
	"github.com/kiln-project/kiln/assets/installconfig/types"
	"github.com/kiln-project/kiln/assets/installconfig/types/local"
)

// Local returns the install-config of cluster "demo" in example.test on the
// local platform with API VIP vip, or without one when vip is empty.
func Local(vip string) *installconfig.InstallConfig {
	return &installconfig.InstallConfig{Config: &types.Config{
		APIVersion: types.APIVersion,
		Metadata:   types.Metadata{Name: "demo"},
		BaseDomain: "example.test",
		Networking: &types.Networking{ServiceNetwork: []string{"172.30.0.0/16"}},
		Platform:   types.Platform{Local: &local.Platform{APIVIP: vip}},
	}}
}
