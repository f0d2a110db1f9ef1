package graph

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"reflect"
	"slices"
	"sync"

	"github.com/sirupsen/logrus"

	"github.com/kiln-project/kiln/graph/atomicfile"
	"github.com/kiln-project/kiln/graph/installdir"
)

// Store resolves assets for one --dir. It generates what is missing or
// stale, reuses what the state file holds, and lets files the user edited on
// disk win. Nothing is written to --dir until Persist has every value.
type Store struct {
	dir     string
	log     logrus.FieldLogger
	force   bool
	retired []string
	renew   map[string]bool
	state   *State // as read from disk, less retired assets; never modified after Open
	w       *atomicfile.Writer

	mu    sync.Mutex
	nodes map[string]*node
	// budget counts the files of kinds with a total size limit that the
	// assets' Load read.
	budget *budget
}

// Option configures a Store.
type Option func(*Store)

// WithLogger sends the store's messages to l (default: discarded).
func WithLogger(l logrus.FieldLogger) Option { return func(s *Store) { s.log = l } }

// WithForceRegenerate makes the store regenerate a file the user edited when
// the file's own dependencies changed too, discarding the edit, instead of
// stopping with a ConflictError.
func WithForceRegenerate(force bool) Option { return func(s *Store) { s.force = force } }

// WithRetired names asset IDs that an earlier kiln kept in the state file
// and this one no longer has. Open drops their entries, so the next Persist
// writes a state file without them (a retired secret does not linger
// there), and removes them from every other entry's parents, so an asset
// that depended on a retired one is restored as it was instead of being
// regenerated: a --dir made by an earlier kiln resumes with the very same
// files. Files a retired asset wrote into --dir are left alone. A store
// opened without it keeps such entries, like those of every asset it does
// not fetch.
func WithRetired(ids ...string) Option {
	return func(s *Store) { s.retired = append(s.retired, ids...) }
}

// WithRenew makes the store generate the assets ids again, whatever the
// state file and --dir hold, and so everything made from them: kiln certs
// renew issues leaf certificates again from the same CAs. The files of
// --dir that an asset of ids writes are replaced even when the user edited
// them.
func WithRenew(ids ...string) Option {
	return func(s *Store) {
		for _, id := range ids {
			s.renew[id] = true
		}
	}
}

// WithFaults passes every file-system operation of the store through fault
// (see atomicfile.Writer.Fault): a test seam to fail or crash a run at any
// write, rename or remove.
func WithFaults(fault func(op atomicfile.Op, path string) error) Option {
	return func(s *Store) { s.w.Fault = fault }
}

// Open returns the store of dir, reading its state file if there is one.
// It first finishes a run that was interrupted while writing dir and
// removes the temporary files of interrupted writes (docs/crash-safety.md),
// and it sets the state file and the copies of consumed files back to mode
// 0600 if they were widened. The store follows no symbolic link below dir
// where it writes, nor in the files it reads there: a link is an
// *atomicfile.SymlinkError naming it.
func Open(dir string, opts ...Option) (*Store, error) {
	quiet := logrus.New()
	quiet.SetOutput(io.Discard)
	s := &Store{dir: dir, log: quiet, w: &atomicfile.Writer{Root: dir}, nodes: map[string]*node{}, budget: &budget{}, renew: map[string]bool{}}
	for _, o := range opts {
		o(s)
	}
	st, err := readState(dir)
	if err != nil {
		return nil, err
	}
	if err := s.recover(st); err != nil {
		return nil, err
	}
	if s.state, err = readState(dir); err != nil {
		return nil, err
	}
	if dropped := s.state.retire(s.retired); len(dropped) > 0 {
		s.log.Debugf("Dropping retired assets from the state file: %v", dropped)
	}
	if fixed, err := enforceStateMode(dir); err != nil {
		return nil, err
	} else if fixed {
		s.log.Warnf("%s was readable by others; set it back to mode 0600 (it holds every private key)",
			filepath.Join(dir, installdir.State))
	}
	if fixed, err := enforceConsumedMode(dir); err != nil {
		return nil, err
	} else if len(fixed) > 0 {
		s.log.Warnf("%v were readable by others; set them back to mode 0600 (install-config.yaml holds the pull secret)", fixed)
	}
	return s, nil
}

// origin tells where a node's value came from.
type origin int

const (
	fromGenerate origin = iota // Generate ran
	fromState                  // restored from the state file
	fromDisk                   // loaded from files in --dir
)

// node is one asset being resolved; done is closed when the fields are set.
type node struct {
	asset  Asset
	done   chan struct{}
	err    error
	origin origin
	entry  *StateEntry
	// causes are the files (or IDs) whose change made this value differ
	// from the state file, for conflict messages.
	causes []string
	// onDisk are the files Load found in --dir (path -> hash).
	onDisk map[string]string
}

// Fetch resolves assets and their dependencies and fills each pointer with
// its value. Independent branches are generated in parallel, and a failing
// branch does not stop the others, so every failing asset is reported. An
// error is an *AssetError carrying the path from the requested asset to the
// failing one, several of them (sorted; see Errors), or a *CycleError.
func (s *Store) Fetch(ctx context.Context, assets ...Asset) error {
	if err := walk(assets, nil); err != nil {
		return err
	}
	var wg sync.WaitGroup
	for _, a := range assets {
		wg.Go(func() { s.resolve(ctx, a) })
	}
	wg.Wait()
	var errs []error
	for _, a := range assets {
		errs = append(errs, s.node(a.ID()).err)
	}
	if err := joinAssetErrors(errs); err != nil {
		return err
	}
	for _, a := range assets {
		if err := copyAsset(a, s.node(a.ID()).asset); err != nil {
			return err
		}
	}
	return nil
}

// FromState fills a with its value in the state file; found is false when
// the state file has none.
func (s *Store) FromState(a Asset) (found bool, err error) {
	e, ok := s.state.Assets[a.ID()]
	if !ok {
		return false, nil
	}
	if err := restore(a, e.Value); err != nil {
		return true, decodeError(s.dir, a.ID(), err)
	}
	return true, nil
}

func (s *Store) node(id string) *node {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.nodes[id]
}

// resolve returns the finished node of a, building it unless another
// goroutine already is (then it waits for that one). The node is built
// under ctx, the context of the whole Fetch, never one a sibling's failure
// cancels: a node shared by several branches gets the same result whichever
// asks first.
func (s *Store) resolve(ctx context.Context, a Asset) *node {
	s.mu.Lock()
	if n, ok := s.nodes[a.ID()]; ok {
		s.mu.Unlock()
		<-n.done
		return n
	}
	n := &node{asset: a, done: make(chan struct{})}
	s.nodes[a.ID()] = n
	s.mu.Unlock()
	if err := s.build(ctx, n); err != nil {
		n.err = under(a.ID(), err)
	}
	close(n.done)
	return n
}

// build resolves n's dependencies in parallel, then takes n's value from
// disk, from the state file or from Generate.
func (s *Store) build(ctx context.Context, n *node) error {
	id := n.asset.ID()
	deps := n.asset.Dependencies()
	depNodes := make([]*node, len(deps))
	var wg sync.WaitGroup
	for i, d := range deps {
		wg.Go(func() { depNodes[i] = s.resolve(ctx, d) })
	}
	wg.Wait()
	var depErrs []error
	for _, dn := range depNodes {
		depErrs = append(depErrs, dn.err)
	}
	if err := joinAssetErrors(depErrs); err != nil {
		// Report this asset's own bad files too: a user fixing one input
		// error should not discover the next only on the next run.
		if wa, ok := n.asset.(WritableAsset); ok {
			if _, lerr := wa.Load(newDirFetcher(s.dir, inputOf(wa), s.budget)); IsInputError(lerr) {
				err = joinAssetErrors([]error{err, &AssetError{Err: lerr}})
			}
			zero(n.asset)
		}
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	byID := make(map[string]*node, len(deps))
	hashes := make(map[string]string, len(deps))
	for _, dn := range depNodes {
		byID[dn.asset.ID()] = dn
		hashes[dn.asset.ID()] = dn.entry.Hash
	}
	prev := s.state.Assets[id]
	var changed []string // causes of changed parents
	if prev != nil {
		for _, dn := range depNodes {
			recorded, had := prev.Parents[dn.asset.ID()]
			if !had && isDefault(dn.asset) {
				continue // an Introduced parent with the value prev was made with
			}
			if recorded != dn.entry.Hash {
				changed = append(changed, dn.causesOrID()...)
			}
		}
		for pid := range prev.Parents {
			if _, ok := hashes[pid]; !ok {
				changed = append(changed, pid)
			}
		}
		changed = sortedUnique(changed)
	}
	parentsSame := prev != nil && len(changed) == 0

	if s.renew[id] {
		// Issued again whatever the state and --dir hold: kiln certs
		// renew replaces kiln's own value, which Load would find on disk.
		s.log.Debugf("Renewing %s", n.asset.Name())
		if err := n.asset.Generate(ctx, parents{owner: id, nodes: byID}); err != nil {
			return err
		}
		n.origin, n.causes = fromGenerate, []string{id}
		return s.finish(n, hashes, nil)
	}
	if wa, ok := n.asset.(WritableAsset); ok {
		fetcher := newDirFetcher(s.dir, inputOf(wa), s.budget)
		found, err := wa.Load(fetcher)
		if err != nil {
			return err
		}
		if found {
			n.onDisk = fetcher.seen
			files := slices.Sorted(maps.Keys(fetcher.seen))
			switch {
			case prev != nil && !diskEdited(prev.Disk, fetcher.seen) && parentsSame:
				return s.restore(n, prev, hashes)
			case prev != nil && !diskEdited(prev.Disk, fetcher.seen):
				// kiln's own file, now stale: regenerate below.
			case prev != nil && !parentsSame && !s.force:
				return &InputError{Err: &ConflictError{Edited: files, Changed: changed}}
			case prev != nil && !parentsSame:
				s.log.Warnf("Discarding your edit of %v (--force-regenerate)", files)
			default:
				if prev != nil {
					s.log.Warnf("%v was edited since kiln wrote it; using the version on disk", files)
				} else {
					s.log.Infof("Using %v from %s", files, s.dir)
				}
				if c, ok := n.asset.(AdoptionChecker); ok {
					if err := c.CheckAdopted(ctx, parents{owner: id, nodes: s.ancestors(n.asset), ancestors: true}); err != nil {
						return err
					}
				}
				n.origin, n.causes = fromDisk, files
				return s.finish(n, hashes, fetcher.seen)
			}
			zero(n.asset)
		}
	}
	if parentsSame {
		return s.restore(n, prev, hashes)
	}
	s.log.Debugf("Generating %s", n.asset.Name())
	if err := n.asset.Generate(ctx, parents{owner: id, nodes: byID}); err != nil {
		return err
	}
	n.origin, n.causes = fromGenerate, changed
	return s.finish(n, hashes, nil)
}

// isDefault reports whether a is an Introduced asset holding its default.
func isDefault(a Asset) bool {
	i, ok := a.(Introduced)
	return ok && i.Default()
}

// restore takes n's value from the state file. A value that does not
// decode is an error: regenerating it would silently replace, say, a CA.
func (s *Store) restore(n *node, prev *StateEntry, hashes map[string]string) error {
	if err := restore(n.asset, prev.Value); err != nil {
		return decodeError(s.dir, n.asset.ID(), err)
	}
	n.origin = fromState
	n.entry = &StateEntry{Hash: prev.Hash, Parents: hashes, Disk: prev.Disk, Value: prev.Value}
	return nil
}

// finish records n's new value; disk is what Load read, if anything.
func (s *Store) finish(n *node, hashes, disk map[string]string) error {
	b, err := json.Marshal(n.asset)
	if err != nil {
		return fmt.Errorf("cannot store the value: %w", err)
	}
	if disk == nil {
		if wa, ok := n.asset.(WritableAsset); ok {
			disk = map[string]string{}
			for _, f := range wa.Files() {
				disk[f.Path] = hashBytes(f.Data)
			}
		}
	}
	n.entry = &StateEntry{Hash: hashBytes(b), Parents: hashes, Disk: disk, Value: b}
	return nil
}

// ancestors returns the finished nodes of a's dependencies and of theirs,
// transitively, by ID. It is called once a's dependencies are resolved,
// which resolved theirs.
func (s *Store) ancestors(a Asset) map[string]*node {
	out := map[string]*node{}
	var visit func(Asset)
	visit = func(x Asset) {
		for _, d := range x.Dependencies() {
			if _, ok := out[d.ID()]; ok {
				continue
			}
			if n := s.node(d.ID()); n != nil {
				out[d.ID()] = n
				visit(n.asset)
			}
		}
	}
	visit(a)
	return out
}

// causesOrID is what to name when n's change invalidates a dependent.
func (n *node) causesOrID() []string {
	if len(n.causes) > 0 {
		return n.causes
	}
	return []string{n.asset.ID()}
}

// diskEdited tells whether the files read now differ from those recorded.
func diskEdited(recorded, seen map[string]string) bool {
	if len(seen) != len(recorded) {
		return true
	}
	for p, h := range seen {
		if recorded[p] != h {
			return true
		}
	}
	return false
}

// restore sets a to the JSON value v and, when a is a StateChecker, checks
// it.
func restore(a Asset, v json.RawMessage) error {
	zero(a)
	if err := json.Unmarshal(v, a); err != nil {
		return err
	}
	if c, ok := a.(StateChecker); ok {
		return c.CheckState()
	}
	return nil
}

// zero resets the value a points to.
func zero(a Asset) {
	v := reflect.ValueOf(a)
	if v.Kind() == reflect.Pointer && !v.IsNil() {
		v.Elem().SetZero()
	}
}

func sortedUnique(s []string) []string {
	slices.Sort(s)
	return slices.Compact(s)
}

// Generated lists, sorted, the IDs of the assets whose Generate ran in this
// store (not restored from the state file or loaded from --dir).
func (s *Store) Generated() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []string
	for id, n := range s.nodes {
		if n.err == nil && n.entry != nil && n.origin == fromGenerate {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}
