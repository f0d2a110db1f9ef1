package certs

import (
	"bytes"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/kiln-project/kiln/graph"
)

// maxFileSize bounds the files FromDir reads: certificates and kubeconfigs
// are small; anything bigger (images, archives) is skipped unread.
const maxFileSize = 1 << 20

// FromDir returns every distinct certificate of dir, each named after the
// first place it is found in: the state file's assets first (by asset ID,
// e.g. tls/root-ca), then files in path order — PEM certificates (a bundle's
// second certificate is <path>#2) and kubeconfigs' embedded certificates
// (<path> (cluster NAME), <path> (user NAME)). Hidden files and directories
// are skipped (the state file is read as such). Nothing is written.
func FromDir(dir string) ([]Entry, error) {
	st, err := graph.ReadState(dir)
	if err != nil {
		return nil, err
	}
	var out []Entry
	seen := map[string]bool{}
	add := func(name string, c *x509.Certificate) {
		if !seen[string(c.Raw)] {
			seen[string(c.Raw)] = true
			out = append(out, Entry{Name: name, Cert: c})
		}
	}
	ids := make([]string, 0, len(st.Assets))
	for id := range st.Assets {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		if c := stateCert(st, id); c != nil {
			add(id, c)
		}
	}
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if path != dir && strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		if info, err := d.Info(); err != nil || info.Size() > maxFileSize {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, e := range fileCerts(rel, data) {
			add(e.Name, e.Cert)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", dir, err)
	}
	return out, nil
}

// stateCert is the certificate of the asset id in st; nil when it holds
// none.
func stateCert(st *graph.State, id string) *x509.Certificate {
	e, ok := st.Assets[id]
	if !ok {
		return nil
	}
	var v struct {
		Cert []byte `json:"cert"`
	}
	if json.Unmarshal(e.Value, &v) != nil || len(v.Cert) == 0 {
		return nil
	}
	if certs := pemCerts(v.Cert); len(certs) > 0 {
		return certs[0]
	}
	return nil
}

// FirstToExpire returns the certificate of the assets ids in dir's state
// that expires first; ok is false when they hold none.
func FirstToExpire(dir string, ids []string) (e Entry, ok bool, err error) {
	st, err := graph.ReadState(dir)
	if err != nil {
		return Entry{}, false, err
	}
	for _, id := range ids {
		c := stateCert(st, id)
		if c != nil && (!ok || c.NotAfter.Before(e.Cert.NotAfter)) {
			e, ok = Entry{Name: id, Cert: c}, true
		}
	}
	return e, ok, nil
}

// fileCerts returns the certificates of one file: PEM blocks, or those
// embedded in a kubeconfig.
func fileCerts(name string, data []byte) []Entry {
	var out []Entry
	if certs := pemCerts(data); len(certs) > 0 {
		for i, c := range certs {
			n := name
			if i > 0 {
				n = fmt.Sprintf("%s#%d", name, i+1)
			}
			out = append(out, Entry{Name: n, Cert: c})
		}
		return out
	}
	if !bytes.Contains(data, []byte("kind: Config")) {
		return nil
	}
	cfg, err := clientcmd.Load(data)
	if err != nil {
		return nil
	}
	for _, k := range slices.Sorted(maps.Keys(cfg.Clusters)) {
		for _, c := range pemCerts(cfg.Clusters[k].CertificateAuthorityData) {
			out = append(out, Entry{Name: fmt.Sprintf("%s (cluster %s)", name, k), Cert: c})
		}
	}
	for _, k := range slices.Sorted(maps.Keys(cfg.AuthInfos)) {
		if certs := pemCerts(cfg.AuthInfos[k].ClientCertificateData); len(certs) > 0 {
			out = append(out, Entry{Name: fmt.Sprintf("%s (user %s)", name, k), Cert: certs[0]})
		}
	}
	return out
}

// pemCerts parses the CERTIFICATE blocks of data; other blocks (keys) are
// skipped, and so are certificates that do not parse.
func pemCerts(data []byte) []*x509.Certificate {
	var out []*x509.Certificate
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			return out
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		if c, err := x509.ParseCertificate(b.Bytes); err == nil {
			out = append(out, c)
		}
	}
}
