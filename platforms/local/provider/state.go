package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"

	"github.com/kiln-project/kiln/platforms"
)

// stateSchemaVersion is the schema version of the resources with a state
// attribute; version 0 had a running attribute (a bool) instead.
const stateSchemaVersion = 1

// stateAttribute is the state attribute of a machine or daemon: what it is
// to do, platforms.MachineRunning or MachineStopped (one of
// platforms.DesiredStates), running by default. It changes in place; Read
// reports what the thing does, so a crash is drift and a stop never is.
func stateAttribute(what string) schema.StringAttribute {
	return schema.StringAttribute{
		Optional: true, Computed: true,
		Default:    stringdefault.StaticString(platforms.MachineRunning.String()),
		Validators: []validator.String{desiredStateValidator{}},
		Description: fmt.Sprintf("%q or %q: whether the %s is to run. A change starts or stops it in place, keeping its "+
			"files; Read reports what it does, so one found stopped (killed, host rebooted) is drift that an apply starts again.",
			platforms.MachineRunning, platforms.MachineStopped, what),
	}
}

// desiredState returns the state v asks for.
func desiredState(v types.String) (platforms.MachineState, error) {
	return platforms.ParseDesiredState(v.ValueString())
}

// desiredStateValidator accepts the words of platforms.DesiredStates.
type desiredStateValidator struct{}

var _ validator.String = desiredStateValidator{}

// Description implements validator.Describer.
func (desiredStateValidator) Description(context.Context) string {
	words := make([]string, 0, 2)
	for _, s := range platforms.DesiredStates() {
		words = append(words, s.String())
	}
	return "one of " + strings.Join(words, ", ")
}

// MarkdownDescription implements validator.Describer.
func (v desiredStateValidator) MarkdownDescription(ctx context.Context) string {
	return v.Description(ctx)
}

// ValidateString implements validator.String; an unknown value (from a
// variable not yet known) is checked once it is known.
func (desiredStateValidator) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if _, err := desiredState(req.ConfigValue); err != nil {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid state", err.Error())
	}
}

// runningToState upgrades a version-0 state, whose running attribute was a
// bool, to the state attribute: true (or unset) is running, false stopped.
func runningToState() map[int64]resource.StateUpgrader {
	return map[int64]resource.StateUpgrader{
		0: {StateUpgrader: func(_ context.Context, req resource.UpgradeStateRequest, resp *resource.UpgradeStateResponse) {
			data, err := upgradeRunning(req.RawState.JSON)
			if err != nil {
				resp.Diagnostics.AddError("Upgrade the state of version 0", err.Error())
				return
			}
			resp.DynamicValue = &tfprotov6.DynamicValue{JSON: data}
		}},
	}
}

// upgradeRunning rewrites the JSON attributes of a version-0 state: the
// running bool becomes the state word.
func upgradeRunning(raw []byte) ([]byte, error) {
	var attrs map[string]json.RawMessage
	if err := json.Unmarshal(raw, &attrs); err != nil {
		return nil, err
	}
	var running *bool
	if r, ok := attrs["running"]; ok {
		if err := json.Unmarshal(r, &running); err != nil {
			return nil, fmt.Errorf("running: %w", err)
		}
	}
	delete(attrs, "running")
	st := platforms.MachineRunning
	if running != nil && !*running {
		st = platforms.MachineStopped
	}
	word, err := json.Marshal(st.String())
	if err != nil {
		return nil, err
	}
	attrs["state"] = word
	return json.Marshal(attrs)
}
