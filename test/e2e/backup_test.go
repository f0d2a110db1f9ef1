package e2e

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kiln-project/kiln/cmd/cluster/backup"
	"github.com/kiln-project/kiln/graph/installdir"
)

// assertBackup runs `kiln backup cluster` on the running cluster of dir,
// into --dir's backups folder and to --to elsewhere: each archive is 0600,
// passes `kiln backup check`, holds the state, the kubeconfig, metadata
// and the Terraform state of --dir, and its etcd snapshot (checked by
// etcd's own hash) holds the ConfigMap the user's manifest made
// (assertUserManifest). A copy with one byte changed is refused. A third,
// encrypted to key, is read with its identity only.
func assertBackup(t *testing.T, kiln, dir string, key backupKey) {
	t.Helper()
	start := time.Now()
	out, err := runKiln(t, kiln, 5*time.Minute, "backup", "cluster", "--dir", dir)
	if err != nil {
		t.Fatalf("backup cluster: %v\n%s", err, out)
	}
	t.Logf("MEASURE backup cluster: %s\n%s", time.Since(start).Round(100*time.Millisecond), strings.TrimSpace(out))
	m := regexp.MustCompile(`: (/\S+\.tar\.gz), `).FindStringSubmatch(out)
	if m == nil || filepath.Dir(m[1]) != filepath.Join(dir, installdir.Backups) {
		t.Fatalf("backup cluster named no archive in %s:\n%s", filepath.Join(dir, installdir.Backups), out)
	}
	elsewhere := filepath.Join(t.TempDir(), "cluster.tar.gz")
	if out, err := runKiln(t, kiln, 5*time.Minute, "backup", "cluster", "--dir", dir, "--to", elsewhere); err != nil {
		t.Fatalf("backup cluster --to %s: %v\n%s", elsewhere, err, out)
	}
	for _, archive := range []string{m[1], elsewhere} {
		st, err := os.Stat(archive)
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v, mode %v; want 0600", archive, err, st.Mode().Perm())
			continue
		}
		if out, err := runKiln(t, kiln, time.Minute, "backup", "check", archive); err != nil || !strings.Contains(out, "all as the manifest says") {
			t.Errorf("backup check %s: %v\n%s", archive, err, out)
		}
		assertArchive(t, archive)
	}
	// Encrypted to key: read with its identity only.
	sealed := filepath.Join(t.TempDir(), "cluster.tar.gz.age")
	if out, err := runKiln(t, kiln, 5*time.Minute, "backup", "cluster", "--dir", dir, "--to", sealed, "--encrypt-to", key.recipients); err != nil || !strings.Contains(out, "encrypted to 1 key(s)") {
		t.Fatalf("backup cluster --encrypt-to: %v\n%s", err, out)
	}
	if out, err := runKiln(t, kiln, time.Minute, "backup", "check", sealed); err == nil || !strings.Contains(out, "encrypted (age)") {
		t.Errorf("backup check of an encrypted archive without --identity: %v\n%s", err, out)
	}
	if out, err := runKiln(t, kiln, time.Minute, "backup", "check", sealed, "--identity", key.identity); err != nil || !strings.Contains(out, "files of --dir, all as the manifest says") {
		t.Errorf("backup check --identity %s: %v\n%s", sealed, err, out)
	}
	data, err := os.ReadFile(elsewhere)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0x20
	corrupt := filepath.Join(t.TempDir(), "corrupt.tar.gz")
	if err := os.WriteFile(corrupt, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := runKiln(t, kiln, time.Minute, "backup", "check", corrupt); err == nil {
		t.Errorf("backup check of an archive with a byte changed passed:\n%s", out)
	}
}

// assertArchive checks the members of the backup archive: its manifest
// and the files of --dir a restore needs, and the user's ConfigMap in the
// snapshot.
func assertArchive(t *testing.T, archive string) {
	t.Helper()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	var names []string
	var snapshot []byte
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", archive, err)
		}
		names = append(names, hdr.Name)
		if hdr.Name == backup.SnapshotName {
			if snapshot, err = io.ReadAll(tr); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, want := range []string{backup.ManifestName, backup.SnapshotName, backup.DirPrefix + installdir.State,
		backup.DirPrefix + installdir.AdminKubeconfig, backup.DirPrefix + installdir.Metadata} {
		if !slices.Contains(names, want) {
			t.Errorf("%s lacks %s: %q", archive, want, names)
		}
	}
	if !slices.ContainsFunc(names, func(n string) bool { return strings.HasSuffix(n, "terraform.tfstate") }) {
		t.Errorf("%s holds no Terraform state: %q", archive, names)
	}
	if !bytes.Contains(snapshot, []byte("/registry/configmaps/e2e-user/e2e-user")) {
		t.Errorf("%s: etcd's snapshot (%d bytes) holds no ConfigMap e2e-user/e2e-user", archive, len(snapshot))
	}
}
