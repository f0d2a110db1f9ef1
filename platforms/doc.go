// Package platforms holds the contracts between kiln's commands and its
// platforms: Platform, the install-config logic that assets use, and
// Provisioner, the infrastructure that commands create and destroy, with
// the helpers both share. Each platform's config lives in a leaf
// sub-package (listed in platforms/configs); its provisioning, if kiln has
// any, in a package beside it (listed in platforms/provisioners).
package platforms
