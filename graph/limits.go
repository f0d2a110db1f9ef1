package graph

import (
	"fmt"
	"sync"
)

// Input is a kind of file kiln reads from --dir. Each kind has a size limit
// (MaxSize), and manifests one for all of them together (MaxTotal): a file
// past its limit is refused by its size, before it is read, as bad input
// (a *SizeError, exit 2), so that a huge or sparse file in --dir can neither
// exhaust memory nor stall a run. A WritableAsset says which kind its files
// are by implementing Sized; the files of other assets are OtherInput.
type Input int

// Kinds of input. Their limits are the Max*Size constants.
const (
	// OtherInput is a file with no kind of its own: metadata.json,
	// auth/kubeadmin-password, kiln's records below .kiln/.
	OtherInput Input = iota
	// InstallConfigInput is install-config.yaml (or its standard input).
	InstallConfigInput
	// ManifestInput is a file of manifests/ or static-pods/.
	ManifestInput
	// TLSInput is a certificate, key or public key file of tls/.
	TLSInput
	// KubeconfigInput is a kubeconfig, e.g. auth/kubeconfig.
	KubeconfigInput
	// IgnitionInput is bootstrap.ign, master.ign or worker.ign.
	IgnitionInput
	// StateInput is the state file, .kiln_state.json.
	StateInput
	// JournalInput is the journal of an interrupted run, .kiln_journal.json.
	JournalInput
)

// The size limits of the inputs, in bytes. Each leaves room for well more
// than any real cluster needs, and a file kiln itself writes never reaches
// the limit it is read back with.
const (
	// MaxOtherSize bounds a file of OtherInput. Real ones are under 1 KiB.
	MaxOtherSize = 1 << 20
	// MaxInstallConfigSize bounds install-config.yaml. Real ones are a few
	// KiB; a pull secret for many registries and an additionalTrustBundle
	// of a few hundred CAs still fit.
	MaxInstallConfigSize = 1 << 20
	// MaxManifestSize bounds one manifest or static pod file. etcd stores
	// no object over 1.5 MiB; a file of many (a CNI's or an operator's
	// CustomResourceDefinitions) is rarely over 4 MiB.
	MaxManifestSize = 8 << 20
	// MaxManifestsSize bounds every file of manifests/ and static-pods/
	// that one run reads, together: they all go into bootstrap.ign, which
	// must stay under MaxIgnitionSize, and into the state file.
	MaxManifestsSize = 32 << 20
	// MaxTLSFileSize bounds a file of tls/. A certificate with its chain or
	// a key is a few KiB; a CA bundle of a few hundred certificates fits.
	MaxTLSFileSize = 1 << 20
	// MaxKubeconfigSize bounds a kubeconfig: a few KiB of certificates,
	// keys and URLs.
	MaxKubeconfigSize = 1 << 20
	// MaxIgnitionSize bounds an Ignition config. bootstrap.ign carries the
	// manifests (at most MaxManifestsSize, encoded as base64 data URLs, a
	// third larger) and some 100 KiB of PKI and units.
	MaxIgnitionSize = 64 << 20
	// MaxStateSize bounds the state file. It holds each asset's value as
	// JSON: the manifests and bootstrap.ign each once more, in base64.
	MaxStateSize = 256 << 20
	// MaxJournalSize bounds the journal: a whole state file, the files the
	// run writes and the files it consumes.
	MaxJournalSize = 512 << 20
)

// MaxSize is the largest file of kind i that kiln reads, in bytes.
func (i Input) MaxSize() int64 {
	switch i {
	case InstallConfigInput:
		return MaxInstallConfigSize
	case ManifestInput:
		return MaxManifestSize
	case TLSInput:
		return MaxTLSFileSize
	case KubeconfigInput:
		return MaxKubeconfigSize
	case IgnitionInput:
		return MaxIgnitionSize
	case StateInput:
		return MaxStateSize
	case JournalInput:
		return MaxJournalSize
	}
	return MaxOtherSize
}

// MaxTotal is the largest size of all files of kind i one run reads
// together, or 0 when only each file is bounded.
func (i Input) MaxTotal() int64 {
	if i == ManifestInput {
		return MaxManifestsSize
	}
	return 0
}

// String names the kind for messages: "a manifest".
func (i Input) String() string {
	switch i {
	case InstallConfigInput:
		return "install-config"
	case ManifestInput:
		return "a manifest or static pod"
	case TLSInput:
		return "a TLS file"
	case KubeconfigInput:
		return "a kubeconfig"
	case IgnitionInput:
		return "an Ignition config"
	case StateInput:
		return "the state file"
	case JournalInput:
		return "the journal"
	}
	return "a file of --dir"
}

// Sized is a WritableAsset whose files are of a kind of input other than
// OtherInput, which sets their size limit.
type Sized interface {
	// InputKind is the kind of every file the asset loads.
	InputKind() Input
}

// inputOf is the kind of the files a loads.
func inputOf(a Asset) Input {
	if s, ok := a.(Sized); ok {
		return s.InputKind()
	}
	return OtherInput
}

// SizeError is a file larger than kiln reads for its kind of input, or
// the file that takes the files of its kind past their limit together.
type SizeError struct {
	// Path is the file, relative to --dir (or as the user named it).
	Path string
	// Input is its kind.
	Input Input
	// Size is its size in bytes, or the size of all files of the kind
	// read so far with it when Total is set.
	Size int64
	// Limit is the limit passed, in bytes.
	Limit int64
	// Total tells that the limit passed is the kind's MaxTotal.
	Total bool
	// Unsized tells that the input had no size to check before reading
	// (standard input) or grew past the limit while kiln read it: kiln
	// stopped reading at the limit and Size is only a lower bound.
	Unsized bool
}

// Error names the file, its size and the limit.
func (e *SizeError) Error() string {
	switch {
	case e.Total:
		return fmt.Sprintf("%s: with it, the files kiln reads as %s come to %s together, more than the %s it reads of them; "+
			"make them smaller or fewer", e.Path, e.Input, byteSize(e.Size), byteSize(e.Limit))
	case e.Unsized:
		return fmt.Sprintf("%s holds more than %s, the most kiln reads for %s; it was not used", e.Path, byteSize(e.Limit), e.Input)
	}
	return fmt.Sprintf("%s is %s, more than the %s kiln reads for %s; it was not read", e.Path, byteSize(e.Size), byteSize(e.Limit), e.Input)
}

// byteSize prints n in bytes and, from 1 KiB, in a binary unit.
func byteSize(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d bytes", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 4; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%d bytes (%.1f %ciB)", n, float64(n)/float64(div), "KMGTP"[exp])
}

// budget counts what the fetchers of one store read of each kind with a
// MaxTotal, by path, so that a file loaded twice counts once.
type budget struct {
	mu   sync.Mutex
	read map[string]int64 // path -> size, for kinds with a MaxTotal
}

// take records that path, of kind in, has size bytes and fails with a
// *SizeError when the kind's files together pass its MaxTotal.
func (b *budget) take(path string, in Input, size int64) error {
	limit := in.MaxTotal()
	if b == nil || limit == 0 {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.read == nil {
		b.read = map[string]int64{}
	}
	b.read[path] = size
	var total int64
	for _, n := range b.read {
		total += n
	}
	if total > limit {
		delete(b.read, path)
		return &SizeError{Path: path, Input: in, Size: total, Limit: limit, Total: true}
	}
	return nil
}
