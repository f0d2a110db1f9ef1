package graph

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"
)

// TestJournalEncodeKeepsTheStateBytes: the journal's state is the state
// file's content as newState made it (indented; a JSON decoder drops only
// the final newline), and the rest of the journal decodes.
func TestJournalEncodeKeepsTheStateBytes(t *testing.T) {
	state := []byte("{\n  \"version\": 1,\n  \"assets\": {}\n}\n")
	j := &journal{Version: journalVersion, Target: "t", Started: time.Unix(0, 0).UTC(),
		Writes: []journalFile{{Path: "a", Mode: 0o600, Data: []byte("secret"), Was: "h"}}, State: state}
	b, err := j.encode()
	if err != nil {
		t.Fatal(err)
	}
	var got journal
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	if !bytes.Equal(got.State, bytes.TrimSuffix(state, []byte("\n"))) {
		t.Errorf("state %q, want %q", got.State, state)
	}
	if got.Target != "t" || len(got.Writes) != 1 || string(got.Writes[0].Data) != "secret" || got.Writes[0].Was != "h" {
		t.Errorf("decoded %+v", got)
	}
	if _, err := (&journal{Version: journalVersion}).encode(); err == nil {
		t.Error("a journal without a state encoded")
	}
}
