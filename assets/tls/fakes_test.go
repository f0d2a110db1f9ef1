package tls

import (
	"context"
	"fmt"
	"io/fs"
	"path"
	"reflect"
	"sort"
	"sync"
	"testing"

	"golang.org/x/sync/errgroup"

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

func (f fakeFetcher) FetchByPattern(pattern string) ([]*graph.File, error) {
	var out []*graph.File
	for p, data := range f {
		if ok, _ := path.Match(pattern, p); ok {
			out = append(out, &graph.File{Path: p, Data: data})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

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
			return fmt.Errorf("%s was not generated", a.ID())
		}
		reflect.ValueOf(a).Elem().Set(reflect.ValueOf(v).Elem())
	}
	return nil
}

// miniStore resolves a set of assets the way the engine does (load from
// --dir, else generate once all dependencies are done), generating
// independent assets in parallel. It stands in for graph's store in these
// tests.
type miniStore struct {
	fetcher graph.FileFetcher
	// given are assets that are already generated, e.g. the install-config.
	given []graph.Asset
	// serial generates one asset at a time.
	serial bool
}

// run resolves targets and returns every asset by ID, and which were loaded.
func (s *miniStore) run(ctx context.Context, targets ...graph.Asset) (map[string]graph.Asset, map[string]bool, error) {
	var (
		mu     sync.Mutex
		done   = map[string]graph.Asset{}
		loaded = map[string]bool{}
		waits  = map[string]chan struct{}{}
		order  []graph.Asset
	)
	for _, a := range s.given {
		done[a.ID()] = a
	}
	var visit func(a graph.Asset)
	visit = func(a graph.Asset) {
		if _, ok := waits[a.ID()]; ok || done[a.ID()] != nil {
			return
		}
		waits[a.ID()] = make(chan struct{})
		for _, d := range a.Dependencies() {
			visit(d)
		}
		order = append(order, a)
	}
	for _, t := range targets {
		visit(t)
	}
	g, ctx := errgroup.WithContext(ctx)
	if s.serial {
		g.SetLimit(1)
	}
	for _, a := range order {
		g.Go(func() error {
			deps := a.Dependencies()
			p := &fakeParents{declared: map[string]bool{}, values: map[string]graph.Asset{}}
			for _, d := range deps {
				if w, ok := waits[d.ID()]; ok {
					select {
					case <-w:
					case <-ctx.Done():
						return ctx.Err()
					}
				}
				mu.Lock()
				p.declared[d.ID()], p.values[d.ID()] = true, done[d.ID()]
				mu.Unlock()
			}
			found := false
			if w, ok := a.(graph.WritableAsset); ok && s.fetcher != nil {
				var err error
				if found, err = w.Load(s.fetcher); err != nil {
					return fmt.Errorf("%s: %w", a.ID(), err)
				}
			}
			if !found {
				if err := a.Generate(ctx, p); err != nil {
					return fmt.Errorf("%s: %w", a.ID(), err)
				}
			}
			mu.Lock()
			done[a.ID()], loaded[a.ID()] = a, found
			mu.Unlock()
			close(waits[a.ID()])
			return nil
		})
	}
	err := g.Wait()
	return done, loaded, err
}

// mustRun is run for tests.
func (s *miniStore) mustRun(t testing.TB, targets ...graph.Asset) (map[string]graph.Asset, map[string]bool) {
	t.Helper()
	done, loaded, err := s.run(context.Background(), targets...)
	if err != nil {
		t.Fatal(err)
	}
	return done, loaded
}
