package platforms

import (
	"fmt"
	"strconv"
	"strings"
)

// MachineState is what a cluster machine is doing, as its platform sees it,
// or what it is to do: one type from the machine runtime through the
// provisioner and its Terraform provider to the waits on the API, parsed
// (never cast) wherever it is read as a word. The cluster's daemons (load
// balancers) have the same states.
type MachineState string

// Machine states.
const (
	// MachineRunning means the machine runs.
	MachineRunning MachineState = "running"
	// MachineStopped means the machine exists but does not run: it
	// crashed, was stopped, or the host rebooted.
	MachineStopped MachineState = "stopped"
	// MachineAbsent means the machine does not exist.
	MachineAbsent MachineState = "absent"
)

// String returns the state's word.
func (s MachineState) String() string { return string(s) }

// UnmarshalText implements encoding.TextUnmarshaler: a state read from a
// file is one of the three, or an error.
func (s *MachineState) UnmarshalText(word []byte) error {
	st, err := ParseMachineState(string(word))
	if err != nil {
		return err
	}
	*s = st
	return nil
}

// DesiredStates are the states a machine can be asked to be in: it runs or
// it is stopped, keeping its disk. (Absent is asked by destroying it.)
func DesiredStates() []MachineState {
	return []MachineState{MachineRunning, MachineStopped}
}

// ParseMachineState returns the state named word, or a *StateError.
func ParseMachineState(word string) (MachineState, error) {
	return parseState(word, []MachineState{MachineRunning, MachineStopped, MachineAbsent})
}

// ParseDesiredState returns the desired state named word (one of
// DesiredStates), or a *StateError.
func ParseDesiredState(word string) (MachineState, error) {
	return parseState(word, DesiredStates())
}

// parseState returns the state of allowed named word.
func parseState(word string, allowed []MachineState) (MachineState, error) {
	for _, s := range allowed {
		if word == s.String() {
			return s, nil
		}
	}
	return "", &StateError{Word: word, Allowed: allowed}
}

// StateError is a word that names no machine state of those allowed.
type StateError struct {
	// Word is the word given.
	Word string
	// Allowed are the states it could have named.
	Allowed []MachineState
}

// Error names the word and the states allowed.
func (e *StateError) Error() string {
	words := make([]string, len(e.Allowed))
	for i, s := range e.Allowed {
		words[i] = strconv.Quote(s.String())
	}
	return fmt.Sprintf("machine state %q: want %s", e.Word, strings.Join(words, " or "))
}
