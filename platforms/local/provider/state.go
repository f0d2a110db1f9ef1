package provider

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"

	"github.com/kiln-project/kiln/platforms"
)

// stateSchemaVersion is the schema version of the resources with a state
// attribute; version 0 had a running attribute (a bool) instead.
const stateSchemaVersion = 1

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
