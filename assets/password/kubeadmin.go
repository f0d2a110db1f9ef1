package password

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"strings"

	"golang.org/x/crypto/bcrypt"

	"github.com/kiln-project/kiln/graph"
)

var _ graph.WritableAsset = (*KubeadminPassword)(nil)

// FileName is the path of the password file in --dir.
const FileName = "auth/kubeadmin-password"

// Shape of a generated password: four groups of five characters joined by
// dashes, 23 characters from an alphabet without look-alikes (0O1lI), about
// 116 bits of entropy.
const (
	groups    = 4
	groupLen  = 5
	separator = "-"
	alphabet  = "abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789"
	// minLen bounds a password the user provides.
	minLen = 12
	// maxLen is what bcrypt can hash.
	maxLen = 72
)

// bcrypt work factors. The cost slows down guessing a password from its
// hash, which matters for a password a person chose; a generated one (116
// random bits) cannot be guessed at any cost, so it is hashed at a cost of
// 6 (~4 ms) instead of bcrypt's default 10 (~65 ms, the largest single cost
// of `kiln create ignition-configs`). Both are ordinary bcrypt hashes that
// every verifier accepts.
const (
	generatedCost = 6
	userCost      = bcrypt.DefaultCost
)

// KubeadminPassword is the password of the kubeadmin user. The plain
// password exists only in File; manifests read PasswordHash.
type KubeadminPassword struct {
	// PasswordHash is the bcrypt hash of the password.
	PasswordHash []byte `json:"passwordHash"`
	// File is auth/kubeadmin-password, mode 0600. It is a secret: never log it.
	File *graph.File `json:"file"`
}

// ID implements graph.Asset.
func (*KubeadminPassword) ID() string { return "password/kubeadmin" }

// Name implements graph.Asset.
func (*KubeadminPassword) Name() string { return "kubeadmin password" }

// Dependencies implements graph.Asset.
func (*KubeadminPassword) Dependencies() []graph.Asset { return nil }

// String keeps the password out of formatted output.
func (*KubeadminPassword) String() string { return "kubeadmin password (redacted)" }

// GoString keeps the password out of %#v output.
func (p *KubeadminPassword) GoString() string { return p.String() }

// Generate creates a random password from crypto/rand.
func (p *KubeadminPassword) Generate(context.Context, graph.Parents) error {
	pw, err := generate()
	if err != nil {
		return err
	}
	return p.set(pw, generatedCost)
}

// Files implements graph.WritableAsset.
func (p *KubeadminPassword) Files() []*graph.File {
	if p.File == nil {
		return nil
	}
	return []*graph.File{p.File}
}

// Load reuses a password the user wrote to auth/kubeadmin-password;
// surrounding white space is ignored.
func (p *KubeadminPassword) Load(f graph.FileFetcher) (bool, error) {
	file, err := f.FetchByName(FileName)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return true, graph.WithKind(graph.KindInput, err)
	}
	pw := strings.TrimSpace(string(file.Data))
	if len(pw) < minLen || len(pw) > maxLen {
		return true, graph.WithKind(graph.KindInput,
			fmt.Errorf("%s: the password must have %d to %d characters, it has %d", FileName, minLen, maxLen, len(pw)))
	}
	return true, p.set(pw, userCost)
}

// set stores the file and the hash of pw at the bcrypt cost given.
func (p *KubeadminPassword) set(pw string, cost int) error {
	hash, err := bcrypt.GenerateFromPassword([]byte(pw), cost)
	if err != nil {
		return fmt.Errorf("hash the kubeadmin password: %w", err)
	}
	p.PasswordHash = hash
	p.File = &graph.File{Path: FileName, Data: []byte(pw), Mode: 0o600}
	return nil
}

// generate returns a new random password.
func generate() (string, error) {
	var b strings.Builder
	max := big.NewInt(int64(len(alphabet)))
	for g := range groups {
		if g > 0 {
			b.WriteString(separator)
		}
		for range groupLen {
			n, err := rand.Int(rand.Reader, max)
			if err != nil {
				return "", fmt.Errorf("read random bytes: %w", err)
			}
			b.WriteByte(alphabet[n.Int64()])
		}
	}
	return b.String(), nil
}
