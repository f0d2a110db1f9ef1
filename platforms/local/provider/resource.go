package provider

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// configureBackend stores the provider's Backend for a resource; it is nil
// while Terraform only validates.
func configureBackend(req resource.ConfigureRequest, resp *resource.ConfigureResponse) *Backend {
	b, ok := backendFrom(req.ProviderData)
	if !ok {
		resp.Diagnostics.AddError("kilnlocal provider", fmt.Sprintf("unexpected provider data %T", req.ProviderData))
	}
	return b
}

// daemonDir is the directory of the files of the host daemon named name
// (the API load balancer, the LoadBalancer Service controller, the image
// registry): <lb_dir>/<name>, which the three share.
func (b *Backend) daemonDir(name types.String) string {
	return filepath.Join(b.Settings.LBDir, name.ValueString())
}

// addErr reports err as an error diagnostic of operation op on what.
func addErr(d *diag.Diagnostics, op, what string, err error) {
	d.AddError(fmt.Sprintf("%s %s", op, what), err.Error())
}

// errReplaceOnly is the Update error of resources whose every attribute
// forces replacement: Terraform never calls it.
const errReplaceOnly = "every attribute of this resource forces replacement; update is never planned"

// diagError turns error diagnostics into an error.
func diagError(d diag.Diagnostics) error {
	var msgs []string
	for _, e := range d.Errors() {
		msgs = append(msgs, e.Summary()+": "+e.Detail())
	}
	return errors.New(strings.Join(msgs, "; "))
}
