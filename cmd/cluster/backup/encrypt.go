package backup

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"filippo.io/age"
)

// EncryptedSuffix ends the name of an encrypted archive that kiln names.
const EncryptedSuffix = ".age"

// ageHeader opens every encrypted archive: age's binary format, as the
// age command writes it without --armor.
const ageHeader = "age-encryption.org/v1\n"

// ErrEncrypted is the error of reading an encrypted archive without an
// identity.
var ErrEncrypted = errors.New("the archive is encrypted (age): give the identity file that decrypts it (--identity)")

// ReadRecipients reads the age recipients an archive is encrypted to from
// the file at path: one public key ("age1…") per line, as age -R reads
// them, with # comments and blank lines. It holds no secret.
func ReadRecipients(path string) ([]age.Recipient, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	rs, err := age.ParseRecipients(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return rs, nil
}

// ReadFile is Read of the archive at path, decrypted with the identities
// of the file identityFile when it is not "": kiln backup check's and kiln
// restore cluster's one way in. An error of the identity file is an
// *IdentityError; one of the archive names its path.
func ReadFile(path, identityFile string, s Sinks) (Manifest, error) {
	var ids []age.Identity
	if identityFile != "" {
		var err error
		if ids, err = ReadIdentities(identityFile); err != nil {
			return Manifest{}, &IdentityError{Err: err}
		}
	}
	f, err := os.Open(path)
	if err != nil {
		return Manifest{}, err
	}
	defer f.Close()
	m, err := Read(f, ids, s)
	if err != nil {
		return m, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

// IdentityError is ReadFile's error of its identity file (--identity).
type IdentityError struct{ Err error }

func (e *IdentityError) Error() string { return "--identity: " + e.Err.Error() }

// Unwrap returns the error of reading the file.
func (e *IdentityError) Unwrap() error { return e.Err }

// ReadIdentities reads the age identities that decrypt an archive from
// the file at path ("AGE-SECRET-KEY-1…" lines, as age-keygen and kiln
// backup keygen write them). It is a secret: a file that its group or
// others may read, or that is a link, is refused, as ssh refuses such a
// private key.
func ReadIdentities(path string) ([]age.Identity, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("%s is readable by others (mode %04o): it holds a private key; chmod 600 it", path, st.Mode().Perm())
	}
	ids, err := age.ParseIdentities(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return ids, nil
}

// WriteIdentity writes a new age X25519 identity to the file path (0600,
// with a comment naming its public key as age-keygen writes one) and
// returns its public key, the recipient to encrypt backups to. The file
// appears whole or not at all, and never replaces one there (nor follows
// a link there).
func WriteIdentity(path string) (recipient string, err error) {
	id, err := age.GenerateX25519Identity()
	if err != nil {
		return "", err
	}
	r := id.Recipient().String()
	tmp, err := os.CreateTemp(filepath.Dir(path), ".kiln-keygen-*") // 0600
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name())
	_, err = fmt.Fprintf(tmp, "# kiln backup identity: it decrypts the backups encrypted to its public key\n# public key: %s\n%s\n", r, id.String())
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", err
	}
	// A hard link is made only where nothing is: never over a file.
	if err := os.Link(tmp.Name(), path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return "", fmt.Errorf("%s exists: kiln never replaces an identity", path)
		}
		return "", err
	}
	return r, nil
}

// encrypting returns w wrapped to encrypt to rs (no wrapping when rs is
// empty) and the function that ends the encrypted stream.
func encrypting(w io.Writer, rs []age.Recipient) (io.Writer, func() error, error) {
	if len(rs) == 0 {
		return w, func() error { return nil }, nil
	}
	ew, err := age.Encrypt(w, rs...)
	if err != nil {
		return nil, nil, err
	}
	return ew, ew.Close, nil
}

// plain returns the archive's gzip stream of r: r's own, or decrypted
// with ids when r is encrypted (ErrEncrypted when ids is empty). An
// identity that does not decrypt it is named in the error.
func plain(r io.Reader, ids []age.Identity) (io.Reader, error) {
	br := bufio.NewReader(r)
	head, _ := br.Peek(len(ageHeader))
	if !bytes.Equal(head, []byte(ageHeader)) {
		return br, nil
	}
	if len(ids) == 0 {
		return nil, ErrEncrypted
	}
	d, err := age.Decrypt(br, ids...)
	if err != nil {
		var none *age.NoIdentityMatchError
		if errors.As(err, &none) {
			return nil, errors.New("the archive is encrypted to other keys than the identity file's")
		}
		return nil, fmt.Errorf("decrypting: %w", err)
	}
	return d, nil
}
