// Package targets lists what each `kiln create` subcommand writes into
// --dir. A target is a plain list of writable assets; the engine resolves
// everything they depend on and consumes the files of earlier targets.
package targets

import (
	"github.com/kiln-project/kiln/assets/ignitionconfigs"
	"github.com/kiln-project/kiln/assets/installconfig"
	"github.com/kiln-project/kiln/assets/kubeconfig"
	"github.com/kiln-project/kiln/assets/manifests"
	"github.com/kiln-project/kiln/assets/metadata"
	"github.com/kiln-project/kiln/graph"
)

// Target names, which are also the `kiln create` subcommands.
const (
	// InstallConfigName writes install-config.yaml.
	InstallConfigName = "install-config"
	// ManifestsName writes the Kubernetes manifests.
	ManifestsName = "manifests"
	// IgnitionConfigsName writes bootstrap.ign, master.ign and worker.ign.
	IgnitionConfigsName = "ignition-configs"
)

// InstallConfig is `kiln create install-config`.
func InstallConfig() graph.Target {
	return graph.Target{Name: InstallConfigName, Assets: []graph.WritableAsset{
		&installconfig.InstallConfig{},
	}}
}

// Manifests is `kiln create manifests`: the manifests the bootstrap machine
// applies, which the user may edit before creating the Ignition configs.
func Manifests() graph.Target {
	return graph.Target{Name: ManifestsName, Assets: append([]graph.WritableAsset{}, manifests.Assets()...)}
}

// IgnitionConfigs is `kiln create ignition-configs`: the Ignition configs,
// the admin kubeconfig and metadata.json. It consumes install-config.yaml
// and the manifests.
func IgnitionConfigs() graph.Target {
	return graph.Target{Name: IgnitionConfigsName, Assets: []graph.WritableAsset{
		&ignitionconfigs.Bootstrap{}, &ignitionconfigs.Master{}, &ignitionconfigs.Worker{},
		&kubeconfig.Admin{}, &metadata.Metadata{},
	}}
}

// All returns every target in the order a user runs them.
func All() []graph.Target {
	return []graph.Target{InstallConfig(), Manifests(), IgnitionConfigs()}
}

// Retired lists the IDs of assets that an earlier kiln kept in the state
// file and this one no longer has; a store that writes --dir is opened with
// graph.WithRetired(Retired()...), so the state file sheds them and what
// depended on them is kept as it was:
//
//   - password/kubeadmin and manifests/kubeadmin: the kubeadmin password
//     and the Secret with its bcrypt hash. No component read the hash (kiln
//     runs no OAuth server), so the password authenticated nothing. A
//     --dir's auth/kubeadmin-password is left where it is.
func Retired() []string {
	return []string{"password/kubeadmin", "manifests/kubeadmin"}
}

// Assets returns the assets of every target, for `kiln graph`.
func Assets() []graph.Asset {
	var out []graph.Asset
	for _, t := range All() {
		for _, a := range t.Assets {
			out = append(out, a)
		}
	}
	return out
}
