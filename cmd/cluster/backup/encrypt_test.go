package backup

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"filippo.io/age"
)

// identity writes a new identity file in dir and returns its path and
// recipients.
func identity(t *testing.T, dir, name string) (string, []age.Recipient) {
	t.Helper()
	path := filepath.Join(dir, name)
	r, err := WriteIdentity(path)
	if err != nil {
		t.Fatal(err)
	}
	rs, err := age.ParseRecipients(strings.NewReader(r + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	return path, rs
}

// TestEncryptedArchive: an archive encrypted to a key is read with its
// identity only; without one, or with another, the error says so; a cut
// or altered encrypted archive does not pass.
func TestEncryptedArchive(t *testing.T) {
	dir, snapshot := testDir(t)
	m := manifestOf(t, dir, snapshot)
	keys := t.TempDir()
	idPath, rs := identity(t, keys, "backup.key")
	otherPath, _ := identity(t, keys, "other.key")

	var b bytes.Buffer
	w, end, err := encrypting(&b, rs)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(archive(t, m, dir, snapshot)); err != nil {
		t.Fatal(err)
	}
	if err := end(); err != nil {
		t.Fatal(err)
	}
	data := b.Bytes()
	if !bytes.HasPrefix(data, []byte(ageHeader)) || bytes.Contains(data, []byte("bolt page")) || bytes.Contains(data, []byte(ManifestName)) {
		t.Fatal("the encrypted archive is not age's format, or shows its content")
	}

	ids, err := ReadIdentities(idPath)
	if err != nil {
		t.Fatal(err)
	}
	var snap bytes.Buffer
	got, err := Read(bytes.NewReader(data), ids, Sinks{Snapshot: &snap})
	if err != nil || got.Snapshot != m.Snapshot {
		t.Fatalf("Read with the identity: %+v, %v", got.Snapshot, err)
	}
	if want, _ := os.ReadFile(snapshot); !bytes.Equal(snap.Bytes(), want) {
		t.Error("the decrypted snapshot differs from the one backed up")
	}

	if _, err := Check(bytes.NewReader(data), nil); !errors.Is(err, ErrEncrypted) || !strings.Contains(err.Error(), "--identity") {
		t.Errorf("Check without an identity: %v, want ErrEncrypted naming --identity", err)
	}
	others, err := ReadIdentities(otherPath)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Check(bytes.NewReader(data), others); err == nil || !strings.Contains(err.Error(), "encrypted to other keys") {
		t.Errorf("Check with another identity: %v", err)
	}
	if _, err := Check(bytes.NewReader(data[:len(data)-100]), ids); err == nil {
		t.Error("a cut encrypted archive passed")
	}
	altered := bytes.Clone(data)
	altered[len(altered)/2] ^= 1
	if _, err := Check(bytes.NewReader(altered), ids); err == nil {
		t.Error("an altered encrypted archive passed")
	}
	// A plain archive is read whether or not an identity is given.
	if _, err := Check(bytes.NewReader(archive(t, m, dir, snapshot)), ids); err != nil {
		t.Errorf("a plain archive with an identity: %v", err)
	}
}

// TestIdentityFiles: an identity file is 0600 and never replaced; one
// that others may read, or a link, is refused; a recipients file holds
// public keys only.
func TestIdentityFiles(t *testing.T) {
	keys := t.TempDir()
	idPath, _ := identity(t, keys, "backup.key")
	st, err := os.Stat(idPath)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("identity file mode %v, %v; want 0600", st.Mode(), err)
	}
	before, _ := os.ReadFile(idPath)
	if _, err := WriteIdentity(idPath); err == nil || !strings.Contains(err.Error(), "never replaces") {
		t.Errorf("a second keygen to the same file: %v", err)
	}
	if after, _ := os.ReadFile(idPath); !bytes.Equal(before, after) {
		t.Error("the identity file was replaced")
	}
	if ents, _ := os.ReadDir(keys); len(ents) != 1 {
		t.Errorf("keygen left %d files, want the identity only", len(ents))
	}
	link := filepath.Join(keys, "link.key")
	if err := os.Symlink(idPath, link); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadIdentities(link); err == nil {
		t.Error("an identity read through a link")
	}
	if _, err := WriteIdentity(link); err == nil {
		t.Error("keygen wrote through a link")
	}
	if err := os.Chmod(idPath, 0o640); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadIdentities(idPath); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("a group-readable identity: %v", err)
	}

	recipients := filepath.Join(keys, "recipients")
	r1, _ := age.GenerateX25519Identity()
	r2, _ := age.GenerateX25519Identity()
	content := "# the operators' keys\n" + r1.Recipient().String() + "\n\n" + r2.Recipient().String() + "\n"
	if err := os.WriteFile(recipients, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if rs, err := ReadRecipients(recipients); err != nil || len(rs) != 2 {
		t.Errorf("recipients: %d, %v; want 2", len(rs), err)
	}
	if err := os.WriteFile(recipients, []byte(r1.String()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadRecipients(recipients); err == nil || !strings.Contains(err.Error(), recipients) {
		t.Errorf("a private key as a recipient: %v", err)
	}
}
