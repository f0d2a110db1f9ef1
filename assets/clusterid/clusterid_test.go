package clusterid

import (
	"bytes"
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/kiln-project/kiln/graph"
)

func TestInfraID(t *testing.T) {
	tests := []struct{ name, wantBase string }{
		{"dev", "dev-"},
		{"My_Cluster.1", "my-cluster-1-"},
		{strings.Repeat("a", 40), strings.Repeat("a", maxBaseLength) + "-"},
		{"-x-", "x-"},
		{"", ""},
	}
	for _, tt := range tests {
		got, err := newInfraID(tt.name, bytes.NewReader(bytes.Repeat([]byte{1}, 5)))
		if err != nil {
			t.Fatal(err)
		}
		if want := tt.wantBase + "bbbbb"; got != want {
			t.Errorf("newInfraID(%q) = %q, want %q", tt.name, got, want)
		}
	}
	// Bytes at or above the rejection limit (252) are skipped.
	got, _ := newInfraID("dev", bytes.NewReader([]byte{255, 253, 0, 35, 36, 71, 251}))
	if got != "dev-a9a99" {
		t.Errorf("rejection sampling: got %q", got)
	}
}

func TestGenerateUsesTheClusterName(t *testing.T) {
	a := &ClusterID{}
	if err := a.generate("dev", randReader{}); err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^dev-[a-z0-9]{5}$`).MatchString(a.InfraID) {
		t.Errorf("infra ID %q", a.InfraID)
	}
	if !regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`).MatchString(a.UUID) {
		t.Errorf("UUID %q is not version 4", a.UUID)
	}
}

func TestGenerateReadsOnlyTheInstallConfig(t *testing.T) {
	deps := (&ClusterID{}).Dependencies()
	if len(deps) != 1 || deps[0].ID() != "install-config" {
		t.Errorf("dependencies = %v", deps)
	}
	err := (&ClusterID{}).Generate(context.Background(), noParents{})
	if err == nil {
		t.Error("Generate without its install-config succeeded")
	}
}

type randReader struct{}

func (randReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(i*37 + 11)
	}
	return len(p), nil
}

type noParents struct{}

func (noParents) Get(...graph.Asset) error { return errors.New("no parents") }
