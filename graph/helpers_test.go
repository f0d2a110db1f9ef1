package graph_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/kiln-project/kiln/graph"
)

// spec fixes the identity of a test asset type: its ID, dependencies and
// file (empty for assets that are not written).
type spec interface {
	id() string
	deps() []graph.Asset
	file() string
}

type (
	sIC   struct{}
	sKey1 struct{}
	sKey2 struct{}
	sCert struct{}
	sMan  struct{}
	sIgn  struct{}
	sCycA struct{}
	sCycB struct{}
)

func (sIC) id() string            { return "ic" }
func (sIC) deps() []graph.Asset   { return nil }
func (sIC) file() string          { return "config.txt" }
func (sKey1) id() string          { return "key1" }
func (sKey1) deps() []graph.Asset { return nil }
func (sKey1) file() string        { return "" }
func (sKey2) id() string          { return "key2" }
func (sKey2) deps() []graph.Asset { return nil }
func (sKey2) file() string        { return "" }
func (sCert) id() string          { return "cert" }
func (sCert) deps() []graph.Asset { return []graph.Asset{&fileAsset[sIC]{}, &plain[sKey1]{}} }
func (sCert) file() string        { return "" }
func (sMan) id() string           { return "man" }
func (sMan) deps() []graph.Asset  { return []graph.Asset{&fileAsset[sIC]{}, &plain[sCert]{}} }
func (sMan) file() string         { return "manifests/m.yaml" }
func (sIgn) id() string           { return "ign" }
func (sIgn) deps() []graph.Asset  { return []graph.Asset{&fileAsset[sMan]{}, &plain[sKey2]{}} }
func (sIgn) file() string         { return "ign.json" }
func (sCycA) id() string          { return "a" }
func (sCycA) deps() []graph.Asset { return []graph.Asset{&plain[sCycB]{}} }
func (sCycA) file() string        { return "" }
func (sCycB) id() string          { return "b" }
func (sCycB) deps() []graph.Asset { return []graph.Asset{&plain[sCycA]{}} }
func (sCycB) file() string        { return "" }

// hooks let a test observe and steer Generate; they travel in the context.
type hooks struct {
	mu    sync.Mutex
	calls map[string]int
	gen   map[string]func(ctx context.Context, p graph.Parents) error
}

type hooksKey struct{}

func withHooks(t *testing.T) (context.Context, *hooks) {
	h := &hooks{calls: map[string]int{}, gen: map[string]func(context.Context, graph.Parents) error{}}
	return context.WithValue(t.Context(), hooksKey{}, h), h
}

func (h *hooks) count(id string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.calls[id]
}

// plain is a test asset that is not written to disk. Its value records
// its parents' values, so the order of generation shows in it.
type plain[S spec] struct {
	Value string `json:"value"`
}

func (a *plain[S]) ID() string                  { var s S; return s.id() }
func (a *plain[S]) Name() string                { return "test asset " + a.ID() }
func (a *plain[S]) Dependencies() []graph.Asset { var s S; return s.deps() }
func (a *plain[S]) value() string               { return a.Value }

func (a *plain[S]) Generate(ctx context.Context, p graph.Parents) error {
	h := ctx.Value(hooksKey{}).(*hooks)
	h.mu.Lock()
	h.calls[a.ID()]++
	fn := h.gen[a.ID()]
	h.mu.Unlock()
	if fn != nil {
		if err := fn(ctx, p); err != nil {
			return err
		}
	}
	var vals []string
	for _, d := range a.Dependencies() {
		if err := p.Get(d); err != nil {
			return err
		}
		vals = append(vals, d.(interface{ value() string }).value())
	}
	a.Value = a.ID() + "(" + strings.Join(vals, ",") + ")"
	return nil
}

// fileAsset is a plain asset written to its spec's file.
type fileAsset[S spec] struct {
	plain[S]
}

func (a *fileAsset[S]) Files() []*graph.File {
	var s S
	return []*graph.File{{Path: s.file(), Data: []byte(a.Value + "\n")}}
}

func (a *fileAsset[S]) Load(f graph.FileFetcher) (bool, error) {
	var s S
	file, err := f.FetchByName(s.file())
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if strings.HasPrefix(string(file.Data), "bad") {
		return false, &graph.InputError{Err: fmt.Errorf("%s: bad content", s.file())}
	}
	a.Value = strings.TrimSpace(string(file.Data))
	return true, nil
}

// snapshot returns every file under dir with its mode and content.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		info, err := d.Info()
		if err != nil {
			return err
		}
		if d.IsDir() {
			out[rel+"/"] = info.Mode().String()
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		out[rel] = fmt.Sprintf("%s %s", info.Mode(), b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func writeFile(t *testing.T, dir, name, content string) {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, dir, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
