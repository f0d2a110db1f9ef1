package platforms

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"
)

func TestParseMachineState(t *testing.T) {
	for _, tt := range []struct {
		word         string
		state        MachineState
		desired, any bool
	}{
		{"running", MachineRunning, true, true},
		{"stopped", MachineStopped, true, true},
		{"absent", MachineAbsent, false, true},
		{"Running", "", false, false},
		{"", "", false, false},
		{"paused", "", false, false},
	} {
		st, err := ParseMachineState(tt.word)
		if (err == nil) != tt.any || (err == nil && st != tt.state) {
			t.Errorf("ParseMachineState(%q) = %q, %v", tt.word, st, err)
		}
		st, err = ParseDesiredState(tt.word)
		if (err == nil) != tt.desired || (err == nil && st != tt.state) {
			t.Errorf("ParseDesiredState(%q) = %q, %v", tt.word, st, err)
		}
		var se *StateError
		if err != nil && (!errors.As(err, &se) || se.Word != tt.word || !slices.Equal(se.Allowed, DesiredStates())) {
			t.Errorf("ParseDesiredState(%q) error %v, want a *StateError naming the desired states", tt.word, err)
		}
	}
}

// TestMachineStateJSON: a state read from JSON (Terraform variables) is
// one of the three words, or the document does not decode.
func TestMachineStateJSON(t *testing.T) {
	var states map[string]MachineState
	if err := json.Unmarshal([]byte(`{"a":"running","b":"stopped"}`), &states); err != nil ||
		states["a"] != MachineRunning || states["b"] != MachineStopped {
		t.Errorf("decoded %v, %v", states, err)
	}
	var se *StateError
	if err := json.Unmarshal([]byte(`{"a":"paused"}`), &states); !errors.As(err, &se) || se.Word != "paused" {
		t.Errorf("decoding paused: %v, want a *StateError", err)
	}
	data, err := json.Marshal(map[string]MachineState{"a": MachineStopped})
	if err != nil || string(data) != `{"a":"stopped"}` {
		t.Errorf("encoded %s, %v", data, err)
	}
}
