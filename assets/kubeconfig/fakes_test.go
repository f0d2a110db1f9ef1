package kubeconfig

import (
	"context"
	"fmt"
	"io/fs"
	"reflect"
	"testing"

	"github.com/kiln-project/kiln/assets/installconfig"
	"github.com/kiln-project/kiln/assets/installconfig/types"
	"github.com/kiln-project/kiln/graph"
)

// fakeFetcher is a graph.FileFetcher over an in-memory --dir.
type fakeFetcher map[string][]byte

func (f fakeFetcher) FetchByName(p string) (*graph.File, error) {
	data, ok := f[p]
	if !ok {
		return nil, &fs.PathError{Op: "open", Path: p, Err: fs.ErrNotExist}
	}
	return &graph.File{Path: p, Data: data}, nil
}

func (f fakeFetcher) FetchByPattern(string) ([]*graph.File, error) { return nil, fmt.Errorf("unused") }

// fakeParents gives an asset the values of its declared dependencies.
type fakeParents struct {
	declared map[string]bool
	values   map[string]graph.Asset
}

func (p *fakeParents) Get(assets ...graph.Asset) error {
	for _, a := range assets {
		if !p.declared[a.ID()] {
			return fmt.Errorf("%s was not declared as a dependency", a.ID())
		}
		v, ok := p.values[a.ID()]
		if !ok {
			return fmt.Errorf("%s was not given", a.ID())
		}
		reflect.ValueOf(a).Elem().Set(reflect.ValueOf(v).Elem())
	}
	return nil
}

// generate runs a.Generate with the given values for its dependencies.
func generate(t testing.TB, a graph.Asset, values ...graph.Asset) {
	t.Helper()
	p := &fakeParents{declared: map[string]bool{}, values: map[string]graph.Asset{}}
	for _, d := range a.Dependencies() {
		p.declared[d.ID()] = true
	}
	for _, v := range values {
		p.values[v.ID()] = v
	}
	if err := a.Generate(context.Background(), p); err != nil {
		t.Fatalf("%s: %v", a.ID(), err)
	}
}

// testInstallConfig returns an install-config with an API VIP, or without
// one when vip is empty.
func testInstallConfig(vip string) *installconfig.InstallConfig {
	return &installconfig.InstallConfig{Config: &types.Config{
		APIVersion: types.APIVersion,
		Metadata:   types.Metadata{Name: "demo"},
		BaseDomain: "example.test",
		Networking: &types.Networking{ServiceNetwork: []string{"172.30.0.0/16"}},
		Platform:   types.Platform{Local: &types.LocalPlatform{APIVIP: vip}},
	}}
}
