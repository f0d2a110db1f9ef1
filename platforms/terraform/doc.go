// Package terraform runs Terraform-compatible engines (OpenTofu or
// Terraform) for kiln, for any platform.
//
// It uses an engine on PATH whose version fits (ProbeEngine tells its kind
// and version), or builds OpenTofu (falling back to Terraform 1.5.7, the last
// MPL release) from the Go module proxy into kiln's cache (BuildEngine;
// EnsureEngine does whichever applies). It writes kiln's
// own CLI configuration, which installs the providers shipped in the kiln
// binary without any registry (WriteCLIConfig), and it drives one root module
// per stage through github.com/hashicorp/terraform-exec with a state file per
// stage under the cluster directory (Driver), so that a stage such as the
// bootstrap machine can be destroyed alone. Engine output goes line by line to
// a logrus logger at Debug level; the user's own Terraform configuration and
// environment are never used.
package terraform
