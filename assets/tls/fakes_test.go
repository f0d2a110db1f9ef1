package tls

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"golang.org/x/sync/errgroup"

	"github.com/kiln-project/kiln/graph"
	"github.com/kiln-project/kiln/graph/graphtest"
)

// fakeFetcher is an in-memory --dir.
type fakeFetcher = graphtest.Fetcher

// fakeParents serves declared dependencies only, like the engine.
type fakeParents = graphtest.Parents

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
			p := graphtest.NewParents(nil)
			for _, d := range deps {
				if w, ok := waits[d.ID()]; ok {
					select {
					case <-w:
					case <-ctx.Done():
						return ctx.Err()
					}
				}
				mu.Lock()
				p.Declared[d.ID()], p.Values[d.ID()] = true, done[d.ID()]
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
