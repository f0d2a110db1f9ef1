package graph

import (
	"context"
	"io/fs"
)

// Asset is a typed value the installer can produce. Implementations are
// pointers to structs whose exported fields are JSON-serialisable: the store
// persists them in the state file under ID().
type Asset interface {
	// ID is the stable key of the asset, e.g. "tls/admin-client". It is the
	// state-file key, so it must never change once released.
	ID() string
	// Name is a human name used in messages, e.g. "Admin client certificate".
	Name() string
	// Dependencies lists the assets whose generated values Generate reads.
	// Each entry is a zero value; only its ID and type matter.
	Dependencies() []Asset
	// Generate computes the asset from its parents.
	Generate(ctx context.Context, parents Parents) error
}

// WritableAsset is an asset that becomes files in --dir.
type WritableAsset interface {
	Asset
	// Files returns the files of the generated asset, paths relative to --dir.
	Files() []*File
	// Load reads a user-provided or user-edited version of the asset from
	// disk. found is false when none of its files exist.
	Load(files FileFetcher) (found bool, err error)
}

// File is one file of a WritableAsset.
type File struct {
	// Path is slash-separated and relative to --dir.
	Path string `json:"path"`
	// Data is the file's content.
	Data []byte `json:"data"`
	// Mode is the permission of the file; zero means 0644. Files holding
	// secrets use 0600.
	Mode fs.FileMode `json:"mode,omitempty"`
}

// FileFetcher reads files from --dir for WritableAsset.Load.
type FileFetcher interface {
	// FetchByName returns the file at path (relative to --dir); the error
	// satisfies errors.Is(err, fs.ErrNotExist) when it is absent.
	FetchByName(path string) (*File, error)
	// FetchByPattern returns the files matching a path.Match pattern
	// relative to --dir, sorted by path.
	FetchByPattern(pattern string) ([]*File, error)
	// Names returns the paths matching a path.Match pattern relative to
	// --dir, sorted, without reading them: only the files then fetched by
	// name count as the asset's.
	Names(pattern string) ([]string, error)
}

// AdoptionChecker is a WritableAsset that checks the files it loaded from
// --dir before the store adopts them as they are, in place of generating
// them. Files the user edits win, but a file made for another cluster, or
// with CAs the state no longer holds, must not: --dir would then hold two
// clusters' PKI. The store calls CheckAdopted only when it is about to use
// the loaded files as they are (not when it regenerates them or restores
// the asset from the state file).
type AdoptionChecker interface {
	// CheckAdopted checks the value Load read against the asset's
	// ancestors: the values (generated this run or restored from the state
	// file) of its dependencies and of theirs, transitively, since an
	// adopted file stands in for everything it is made from. Asking for
	// an asset that is no ancestor is an error. A mismatch is an input
	// error naming the file and the first item in it that disagrees.
	CheckAdopted(ctx context.Context, ancestors Parents) error
}

// StateChecker is an asset whose value the store checks when it restores it
// from the state file, beyond decoding it: a CA key that no longer parses,
// or was swapped for another, decodes fine but would sign every leaf
// issued from then on. A failing check is reported as a damaged state entry
// (bad input naming the asset and the state file), never repaired by
// generating the value again, which would silently replace the CA.
type StateChecker interface {
	// CheckState reports what is wrong with the value just restored.
	CheckState() error
}

// Parents gives Generate the generated values of declared dependencies.
type Parents interface {
	// Get fills each pointer with the generated value of the asset with the
	// same ID. Asking for an asset that was not declared in Dependencies is
	// an error.
	Get(assets ...Asset) error
}

// Introduced is an asset that a kiln release added as a dependency of assets
// that earlier releases generated without it. A state entry made before it
// existed records no hash for it; when Default reports that its value is the
// one those assets were made with (the behaviour before it existed), that
// entry is not stale because of it, so a --dir made by an earlier kiln
// resumes with the very same values instead of, say, new certificates.
type Introduced interface {
	Asset
	// Default reports whether the value is what dependents made before the
	// asset existed were made with.
	Default() bool
}
