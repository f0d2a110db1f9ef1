// Package tfstate is the state attribute that kiln's Terraform providers
// give what they start and stop in place (a local machine or daemon, an
// ssh host's node): "running" or "stopped", one of
// platforms.DesiredStates.
package tfstate

import (
	"context"
	"fmt"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/kiln-project/kiln/platforms"
)

// Attribute is the state attribute of what: what it is to do,
// platforms.MachineRunning or MachineStopped, running by default. It
// changes in place; Read reports what the thing does, so a crash is drift
// and a stop never is.
func Attribute(what string) schema.StringAttribute {
	return schema.StringAttribute{
		Optional: true, Computed: true,
		Default:    stringdefault.StaticString(platforms.MachineRunning.String()),
		Validators: []validator.String{DesiredValidator{}},
		Description: fmt.Sprintf("%q or %q: whether the %s is to run. A change starts or stops it in place, keeping its "+
			"files; Read reports what it does, so one found stopped (killed, host rebooted) is drift that an apply starts again.",
			platforms.MachineRunning, platforms.MachineStopped, what),
	}
}

// Desired returns the state v asks for.
func Desired(v types.String) (platforms.MachineState, error) {
	return platforms.ParseDesiredState(v.ValueString())
}

// DesiredValidator accepts the words of platforms.DesiredStates.
type DesiredValidator struct{}

var _ validator.String = DesiredValidator{}

// Description implements validator.Describer.
func (DesiredValidator) Description(context.Context) string {
	words := make([]string, 0, 2)
	for _, s := range platforms.DesiredStates() {
		words = append(words, s.String())
	}
	return "one of " + strings.Join(words, ", ")
}

// MarkdownDescription implements validator.Describer.
func (v DesiredValidator) MarkdownDescription(ctx context.Context) string {
	return v.Description(ctx)
}

// ValidateString implements validator.String; an unknown value (from a
// variable not yet known) is checked once it is known.
func (DesiredValidator) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if _, err := Desired(req.ConfigValue); err != nil {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid state", err.Error())
	}
}
