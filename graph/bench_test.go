package graph_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"testing"

	"github.com/kiln-project/kiln/graph"
)

// benchLeaf is one of many independent assets; its ID comes from N, which
// is also in its JSON value so a restored leaf keeps its identity.
type benchLeaf struct {
	N   int      `json:"n"`
	Sum [32]byte `json:"sum"`
}

func (l *benchLeaf) ID() string                  { return fmt.Sprintf("leaf/%d", l.N) }
func (l *benchLeaf) Name() string                { return l.ID() }
func (l *benchLeaf) Dependencies() []graph.Asset { return nil }
func (l *benchLeaf) Generate(context.Context, graph.Parents) error {
	l.Sum = sha256.Sum256([]byte(l.ID()))
	return nil
}

// benchRoot is a writable asset over all leaves.
type benchRoot struct {
	Leaves int    `json:"leaves"`
	Data   []byte `json:"data"`
}

func (r *benchRoot) ID() string   { return "root" }
func (r *benchRoot) Name() string { return "root" }
func (r *benchRoot) Dependencies() []graph.Asset {
	deps := make([]graph.Asset, r.Leaves)
	for i := range deps {
		deps[i] = &benchLeaf{N: i}
	}
	return deps
}
func (r *benchRoot) Generate(_ context.Context, p graph.Parents) error {
	r.Data = r.Data[:0]
	for _, d := range r.Dependencies() {
		if err := p.Get(d); err != nil {
			return err
		}
		r.Data = append(r.Data, d.(*benchLeaf).Sum[:4]...)
	}
	return nil
}
func (r *benchRoot) Files() []*graph.File {
	return []*graph.File{{Path: "root.bin", Data: r.Data}}
}
func (r *benchRoot) Load(graph.FileFetcher) (bool, error) { return false, nil }

const benchLeaves = 500

// BenchmarkFetchFresh resolves a root over 500 independent assets in a
// new store with no state.
func BenchmarkFetchFresh(b *testing.B) {
	for b.Loop() {
		s, err := graph.Open(b.TempDir())
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Fetch(context.Background(), &benchRoot{Leaves: benchLeaves}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPersistNoop is a second `kiln create` over 500 assets: read the
// state file, restore everything, write nothing.
func BenchmarkPersistNoop(b *testing.B) {
	dir := b.TempDir()
	tg := graph.Target{Name: "bench", Assets: []graph.WritableAsset{&benchRoot{Leaves: benchLeaves}}}
	s, _ := graph.Open(dir)
	if err := s.Persist(context.Background(), tg); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		s, err := graph.Open(dir)
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Persist(context.Background(), graph.Target{Name: "bench", Assets: []graph.WritableAsset{&benchRoot{Leaves: benchLeaves}}}); err != nil {
			b.Fatal(err)
		}
		if g := s.Generated(); len(g) > 0 {
			b.Fatalf("regenerated %d assets", len(g))
		}
	}
}
