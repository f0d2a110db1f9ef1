// Package provider is the Terraform provider of the ssh platform, served by
// the kiln binary itself (`kiln terraform-provider-kilnssh`, plugin protocol
// 6) and installed by kiln into its filesystem mirror beside kilnlocal, so
// one build ships the installer and its provider.
//
// Its source address is kiln.dev/kiln/kilnssh. The provider block says how
// to reach the hosts (user, identity file or agent, known_hosts file, port,
// bastion: remote.Config). One resource:
//   - kilnssh_host: one of the user's hosts running one machine's Ignition
//     config. Create runs footprint.Install (record, payload, config,
//     kiln-ignition.service); Delete runs footprint.Reset, which takes away
//     everything by the record the host keeps; Read asks the host for that
//     record, so a host reset by hand leaves the state and the next plan
//     installs it again. Every attribute forces replacement.
//
// Resources of kiln's own provider rather than provisioners on
// terraform_data (docs/platform-ssh.md): a provisioner runs once at create,
// cannot see a host reset by hand, and its destroy-time provisioner cannot
// read what create recorded.
package provider
