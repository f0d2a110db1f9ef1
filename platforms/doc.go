// Package platforms holds the contracts between kiln's commands and the
// platforms' provisioning: Provisioner, the infrastructure that commands
// create and destroy, with its optional abilities (Scaler, Restarter,
// MachineStater, UnitChecker, EndpointChecker, ImageLoader, Gatherer,
// Router),
// Cluster, what provisioning needs from the assets, and the helpers both
// share. The
// platforms' install-config logic is not here: it is one of the contracts
// of the assets' floor, under assets/installconfig/types.
//
// # Layers
//
// Every import arrow of kiln points to the same floor or a lower one; the
// floors are written once, in the table of test/layering, which fails on
// an arrow that points up and on a package that is on no floor. platforms
// is floor 3: assets never import anything under platforms/, and a
// platform's provisioning reads the install-config through the contracts
// (assets/installconfig/types), which link no asset.
//
// # Adding a platform
//
// A platform is packages of its own plus its entry in each list below: one
// line in each registry, and a field and a case in the schema's root.
// local and none are registered this way; <name> is the platform's key in
// install-config.yaml.
//
//  1. Its install-config section: package assets/installconfig/types/<name>
//     with const Name = "<name>" and the section's struct types (Platform,
//     and MachinePool if its machine pools have settings), each field with
//     a doc comment. In assets/installconfig/types/types.go, one field in
//     Platform (<Name> *<name>.Platform `json:"<name>,omitempty"`), one in
//     MachinePoolPlatform if it has pool settings, and its case in
//     Platform.Names and MachinePoolPlatform.Names (accessors.go). Then
//     `go generate ./assets/installconfig` regenerates the table of
//     `kiln explain` and docs/install-config.md from the new types.
//  2. Its config logic: package assets/installconfig/types/<name>/<name>config
//     implementing configs.Platform (defaults and validation), and
//     configs.MachineAddresser when the platform gives its machines
//     addresses that follow from the install-config, and
//     configs.MachineNamer when the install-config names them (the ssh
//     platform's hosts). Its other differences are optional abilities
//     too, which shared code asks through package configs and never by
//     the platform's name: configs.APIAddresser (an API VIP of its
//     section), configs.NodeProxier (nodes reach the API through a proxy
//     of their own, not api-int), configs.AddonProvider (add-ons and an
//     image registry) and configs.BootstrapWorker (the bootstrap machine
//     joins as a worker). It imports only
//     packages under assets/installconfig/types. Register it with one entry
//     in configs.Platforms (assets/installconfig/types/configs/configs.go),
//     where the survey, defaulting and validation find it (the first entry
//     is the default platform).
//  3. If kiln provisions its infrastructure (none has no provisioning):
//     package platforms/<name>/provision implementing Provisioner and the
//     optional abilities it supports, registered with one entry in
//     platforms/provisioners. Only commands import it. Router says which
//     routes lead to the cluster's addresses (platforms/netroute): every
//     dial of kiln's to them passes its policy first; without it, kiln
//     dials them through any route.
//  4. If it provisions through Terraform: its modules under
//     data/terraform/<name>/, added to the //go:embed line of
//     data/terraform/terraform.go; the provisioner gets them with
//     data/terraform.Platform(<name>.Name) and runs them with
//     platforms/terraform.Driver (terraform.EnsureDriver).
//  5. If kiln itself runs helpers of the platform (the local platform's
//     Terraform provider, API load balancer and service load balancer are
//     hidden kiln commands), one command each, added in cmd/kiln/root.go;
//     the local node image is built by `kiln build node-image`
//     (cmd/kiln/build.go).
package platforms
