// Package graphtest has stand-ins for the asset engine, for testing one
// asset's Generate and Load without a store: an in-memory --dir and a
// Parents that serves given values for declared dependencies only; and
// StateValue, which reads one asset's value from a --dir's state file.
package graphtest

import (
	"context"
	"fmt"
	"io/fs"
	"path"
	"reflect"
	"sort"
	"testing"

	"github.com/kiln-project/kiln/graph"
)

// Fetcher is a graph.FileFetcher over an in-memory --dir: path to content.
type Fetcher map[string][]byte

// FetchByName implements graph.FileFetcher.
func (f Fetcher) FetchByName(p string) (*graph.File, error) {
	data, ok := f[p]
	if !ok {
		return nil, &fs.PathError{Op: "open", Path: p, Err: fs.ErrNotExist}
	}
	return &graph.File{Path: p, Data: data}, nil
}

// FetchByPattern implements graph.FileFetcher.
func (f Fetcher) FetchByPattern(pattern string) ([]*graph.File, error) {
	var out []*graph.File
	for p, data := range f {
		if ok, _ := path.Match(pattern, p); ok {
			out = append(out, &graph.File{Path: p, Data: data})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

// Names implements graph.FileFetcher.
func (f Fetcher) Names(pattern string) ([]string, error) {
	files, err := f.FetchByPattern(pattern)
	names := make([]string, len(files))
	for i, file := range files {
		names[i] = file.Path
	}
	return names, err
}

// Parents gives an asset the values of its declared dependencies; like the
// engine, it refuses an undeclared one.
type Parents struct {
	// Declared are the IDs the asset declared in Dependencies.
	Declared map[string]bool
	// Values are the generated dependencies by ID.
	Values map[string]graph.Asset
}

// NewParents returns the Parents of a with values for its dependencies.
func NewParents(a graph.Asset, values ...graph.Asset) *Parents {
	p := &Parents{Declared: map[string]bool{}, Values: map[string]graph.Asset{}}
	if a != nil {
		for _, d := range a.Dependencies() {
			p.Declared[d.ID()] = true
		}
	}
	for _, v := range values {
		p.Values[v.ID()] = v
	}
	return p
}

// Get implements graph.Parents.
func (p *Parents) Get(assets ...graph.Asset) error {
	for _, a := range assets {
		if !p.Declared[a.ID()] {
			return fmt.Errorf("%s was not declared as a dependency", a.ID())
		}
		v, ok := p.Values[a.ID()]
		if !ok {
			return fmt.Errorf("%s was not generated", a.ID())
		}
		reflect.ValueOf(a).Elem().Set(reflect.ValueOf(v).Elem())
	}
	return nil
}

// Generate runs a.Generate with values for its dependencies and fails the
// test on error.
func Generate(t testing.TB, a graph.Asset, values ...graph.Asset) {
	t.Helper()
	if err := a.Generate(context.Background(), NewParents(a, values...)); err != nil {
		t.Fatalf("%s: %v", a.ID(), err)
	}
}

// StateValue returns the JSON value of asset id in dir's state file and
// fails the test when it has none.
func StateValue(t testing.TB, dir, id string) string {
	t.Helper()
	st, err := graph.ReadState(dir)
	if err != nil {
		t.Fatal(err)
	}
	e := st.Assets[id]
	if e == nil {
		t.Fatalf("no %s in %s's state", id, dir)
	}
	return string(e.Value)
}
