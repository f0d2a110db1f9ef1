// Package crashtest proves kiln's --dir crash safety on the real targets:
// its test interrupts `create manifests` and `create ignition-configs` at
// every file operation, by a crash or by an I/O error, and checks that the
// next run converges (docs/crash-safety.md). Its checks of a --dir's
// certificates are shared with the lock test of cmd/kiln.
package crashtest

import (
	"bytes"
	"compress/gzip"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/kiln-project/kiln/graph"
	"github.com/kiln-project/kiln/graph/installdir"
)

// CheckCerts verifies every certificate in every output of dir (all files
// but the state file and .kiln/) against the CAs in dir's state file, and
// returns what is wrong, or "". needCerts says the outputs must hold some.
func CheckCerts(dir string, needCerts bool) string {
	stateBytes, err := os.ReadFile(filepath.Join(dir, installdir.State))
	if err != nil {
		return err.Error()
	}
	var st graph.State
	if err := json.Unmarshal(stateBytes, &st); err != nil {
		return err.Error()
	}
	roots := x509.NewCertPool()
	nCAs := 0
	for id, e := range st.Assets {
		if !strings.HasPrefix(id, "tls/") || !strings.HasSuffix(id, "-ca") {
			continue
		}
		var ck struct {
			Cert []byte `json:"cert"`
		}
		if err := json.Unmarshal(e.Value, &ck); err != nil || !roots.AppendCertsFromPEM(ck.Cert) {
			return fmt.Sprintf("state: %s has no certificate", id)
		}
		nCAs++
	}
	if needCerts && st.Assets["tls/root-ca"] == nil {
		return "state holds no root CA"
	}
	checked := 0
	var problems []string
	files, err := files(dir)
	if err != nil {
		return err.Error()
	}
	for _, p := range files {
		if p == installdir.State || strings.HasPrefix(p, ".kiln/") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, p))
		if err != nil {
			return err.Error()
		}
		for _, c := range CertsIn(b, 0) {
			checked++
			opts := x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}
			if _, err := c.Verify(opts); err != nil {
				problems = append(problems, fmt.Sprintf("%s: certificate %q does not chain to the state's CAs: %v", p, c.Subject, err))
			}
		}
	}
	if needCerts && checked == 0 {
		return "no certificate found in the outputs"
	}
	return strings.Join(problems, "; ")
}

// CertsIn finds PEM certificates in b and, recursively, in the JSON and
// YAML strings, base64 and data: URLs (gzip too) it holds; depth is 0.
func CertsIn(b []byte, depth int) []*x509.Certificate {
	var out []*x509.Certificate
	if depth > 4 {
		return nil
	}
	if zr, err := gzip.NewReader(bytes.NewReader(b)); err == nil {
		if u, err := io.ReadAll(zr); err == nil {
			return CertsIn(u, depth+1)
		}
	}
	rest := b
	for {
		var blk *pem.Block
		blk, rest = pem.Decode(rest)
		if blk == nil {
			break
		}
		if blk.Type == "CERTIFICATE" {
			if c, err := x509.ParseCertificate(blk.Bytes); err == nil {
				out = append(out, c)
			}
		}
	}
	if len(out) > 0 {
		return out
	}
	for _, tok := range strings.FieldsFunc(string(b), func(r rune) bool {
		return strings.ContainsRune(" \t\r\n\"'", r)
	}) {
		switch {
		case strings.HasPrefix(tok, "data:"):
			meta, data, ok := strings.Cut(strings.TrimPrefix(tok, "data:"), ",")
			if !ok {
				continue
			}
			var raw []byte
			if strings.HasSuffix(meta, ";base64") {
				raw, _ = base64.StdEncoding.DecodeString(data)
			} else if s, err := url.PathUnescape(data); err == nil {
				raw = []byte(s)
			}
			out = append(out, CertsIn(raw, depth+1)...)
		case len(tok) > 100:
			if raw, err := base64.StdEncoding.DecodeString(tok); err == nil {
				out = append(out, CertsIn(raw, depth+1)...)
			}
		}
	}
	return out
}

// files lists dir's files, relative to it.
func files(dir string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out = append(out, rel)
		return nil
	})
	return out, err
}
