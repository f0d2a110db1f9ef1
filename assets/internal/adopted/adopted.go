package adopted

import (
	"bytes"
	"compress/gzip"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"regexp"
	"strings"

	"github.com/coreos/ignition/v2/config/v3_3/types"
	"github.com/vincent-petithory/dataurl"

	"github.com/kiln-project/kiln/assets/clusterid"
	"github.com/kiln-project/kiln/assets/installconfig"
	"github.com/kiln-project/kiln/assets/internal/yamlkeys"
	"github.com/kiln-project/kiln/graph"
)

// ca is one certificate an adopted certificate may chain to, and its name
// for messages.
type ca struct {
	name string
	cert *x509.Certificate
}

// Cluster is what an adopted file must agree with.
type Cluster struct {
	cas                    []ca
	name, uuid, infraID    string
	ignored                map[string]bool
	checkCerts, checkNames bool
}

// certAsset is a certificate asset (a CA, from package tls).
type certAsset interface {
	graph.Asset
	Certificate() (*x509.Certificate, error)
}

// From describes the cluster by the given ancestors of the adopting
// asset, read from p: each certificate asset (a CA of package tls) is a CA
// certificates must chain to; the install-config gives the cluster name and
// more CAs, its additionalTrustBundle; the cluster ID gives the cluster ID
// and infra ID. With no certificate asset, certificates are not checked;
// with neither install-config nor cluster ID, names are not.
func From(p graph.Parents, ancestors ...graph.Asset) (*Cluster, error) {
	if err := p.Get(ancestors...); err != nil {
		return nil, err
	}
	c := &Cluster{ignored: map[string]bool{}}
	for _, a := range ancestors {
		switch a := a.(type) {
		case *installconfig.InstallConfig:
			c.checkNames = true
			c.name = a.Config.Metadata.Name
			for rest := []byte(a.Config.AdditionalTrustBundle); ; {
				var b *pem.Block
				if b, rest = pem.Decode(rest); b == nil {
					break
				}
				if cert, err := x509.ParseCertificate(b.Bytes); err == nil && b.Type == "CERTIFICATE" {
					c.cas = append(c.cas, ca{name: "install-config's additionalTrustBundle", cert: cert})
				}
			}
		case *clusterid.ClusterID:
			c.checkNames = true
			c.uuid, c.infraID = a.UUID, a.InfraID
		case certAsset:
			cert, err := a.Certificate()
			if err != nil {
				return nil, fmt.Errorf("%s: %w", a.ID(), err)
			}
			c.checkCerts = true
			c.cas = append(c.cas, ca{name: a.ID(), cert: cert})
		default:
			return nil, fmt.Errorf("adopted files are not checked against %s", a.ID())
		}
	}
	return c, nil
}

// Ignore leaves the files at paths on the machine (inside Ignition
// configs) unchecked: the user's own manifests hold what they please.
func (c *Cluster) Ignore(paths ...string) {
	for _, p := range paths {
		c.ignored[p] = true
	}
}

// MismatchError is an adopted file that disagrees with the cluster.
type MismatchError struct {
	// File is the adopted file, relative to --dir.
	File string
	// Item is where in File: the path of a file inside an Ignition config
	// (nested configs joined by " > "), and the field of a name; empty for
	// the file itself.
	Item string
	// Problem says what disagrees.
	Problem string
	// More counts the other items of File that disagree.
	More int
}

// Error names the file, the first item that disagrees and the way out.
func (e *MismatchError) Error() string {
	var b strings.Builder
	b.WriteString(e.File + ": ")
	if e.Item != "" {
		b.WriteString(e.Item + ": ")
	}
	b.WriteString(e.Problem)
	switch {
	case e.More == 1:
		b.WriteString(" (one more item of it disagrees too)")
	case e.More > 1:
		fmt.Fprintf(&b, " (%d more items of it disagree too)", e.More)
	}
	fmt.Fprintf(&b, ". It was made for another cluster, or from a state kiln no longer holds: "+
		"remove %s to have kiln write it for this cluster, or restore the state file it was made with", e.File)
	return b.String()
}

// Check checks the adopted file f. The error is an input error, a
// *MismatchError naming f and the first item that disagrees.
func (c *Cluster) Check(f *graph.File) error {
	w := &walker{c: c, file: f.Path}
	w.blob(f.Data, "", 0)
	if w.first == nil {
		return nil
	}
	w.first.More = w.count - 1
	return &graph.InputError{Err: w.first}
}

// maxDepth bounds the nesting of Ignition configs and encodings walked.
const maxDepth = 8

// maxDecoded bounds what one gzip-compressed file of an Ignition config may
// expand to: the largest input kiln reads.
const maxDecoded = graph.MaxIgnitionSize

// walker is one Check: it records the first mismatch and counts them all.
type walker struct {
	c     *Cluster
	file  string
	first *MismatchError
	count int
}

func (w *walker) mismatch(item, format string, args ...any) {
	w.count++
	if w.first == nil {
		w.first = &MismatchError{File: w.file, Item: item, Problem: fmt.Sprintf(format, args...)}
	}
}

// pemBase64 starts "-----BEGIN" in base64.
const pemBase64 = "LS0tLS1CRUdJTi"

// base64PEM is base64 of "-----BEGIN" and what follows it, in any text.
var base64PEM = regexp.MustCompile(pemBase64 + `[A-Za-z0-9+/]*={0,2}`)

// blob checks data found at item.
func (w *walker) blob(data []byte, item string, depth int) {
	if depth > maxDepth {
		return
	}
	if cfg, ok := ignitionConfig(data); ok {
		w.ignition(cfg, item, depth)
		return
	}
	w.certs(data, item)
	w.names(data, item)
	if !bytes.Contains(data, []byte(pemBase64)) {
		return
	}
	// In YAML or JSON (kubeconfigs, Secrets), name the field that holds
	// the base64; in other text, find it where it is.
	values := yamlkeys.Scalars(data, func(_, v string) bool { return strings.HasPrefix(strings.TrimSpace(v), pemBase64) })
	for _, v := range values {
		b64 := strings.Join(strings.Fields(v.Value), "")
		if dec, err := base64.StdEncoding.DecodeString(b64); err == nil {
			w.blob(dec, join(item, v.Field.String()), depth+1)
		}
	}
	if len(values) > 0 {
		return
	}
	for _, m := range base64PEM.FindAll(data, -1) {
		if dec, err := base64.StdEncoding.DecodeString(string(m)); err == nil {
			w.blob(dec, item, depth+1)
		}
	}
}

// join appends where to item, the place of what holds it.
func join(item, where string) string {
	if item == "" {
		return where
	}
	return item + " " + where
}

// ignitionConfig parses data as an Ignition config, if it is one.
func ignitionConfig(data []byte) (*types.Config, bool) {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 || trimmed[0] != '{' || !bytes.Contains(trimmed, []byte(`"ignition"`)) {
		return nil, false
	}
	var cfg types.Config
	if err := json.Unmarshal(trimmed, &cfg); err != nil || cfg.Ignition.Version == "" {
		return nil, false
	}
	return &cfg, true
}

// ignition checks what an Ignition config embeds: the CAs it trusts, the
// configs it merges and the files it writes.
func (w *walker) ignition(cfg *types.Config, item string, depth int) {
	at := func(s string) string {
		if item == "" {
			return s
		}
		return item + " > " + s
	}
	for i, r := range cfg.Ignition.Security.TLS.CertificateAuthorities {
		w.resource(r, at(fmt.Sprintf("ignition.security.tls.certificateAuthorities[%d]", i)), depth)
	}
	for i, r := range cfg.Ignition.Config.Merge {
		w.resource(r, at(fmt.Sprintf("ignition.config.merge[%d]", i)), depth)
	}
	w.resource(cfg.Ignition.Config.Replace, at("ignition.config.replace"), depth)
	for _, f := range cfg.Storage.Files {
		if w.c.ignored[f.Path] {
			continue
		}
		w.resource(f.Contents, at(f.Path), depth)
		for _, r := range f.Append {
			w.resource(r, at(f.Path), depth)
		}
	}
}

// resource checks an embedded (data URL) resource; others are fetched by
// the machine and not kiln's to check.
func (w *walker) resource(r types.Resource, item string, depth int) {
	if r.Source == nil || !strings.HasPrefix(*r.Source, "data:") {
		return
	}
	u, err := dataurl.DecodeString(*r.Source)
	if err != nil {
		return // Ignition's validator, run by Load, reports it
	}
	data := u.Data
	if r.Compression != nil && *r.Compression == "gzip" {
		zr, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			return
		}
		if data, err = io.ReadAll(io.LimitReader(zr, maxDecoded)); err != nil {
			return
		}
	}
	w.blob(data, item, depth+1)
}

// certs checks every PEM certificate in data: each must be one of the
// cluster's CAs or chain to one, through the other certificates of data.
func (w *walker) certs(data []byte, item string) {
	if !w.c.checkCerts {
		return
	}
	var certs []*x509.Certificate
	for rest := data; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		cert, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			w.mismatch(item, "a certificate does not parse: %v", err)
			continue
		}
		certs = append(certs, cert)
	}
	for _, cert := range certs {
		if !w.c.trusts(cert, certs, maxDepth) {
			w.mismatch(item, "certificate %q does not chain to this cluster's CAs (%s)", subject(cert), w.c.caNames())
		}
	}
}

// trusts tells whether cert is one of the cluster's CAs or is signed by
// one, directly or through the certificates of chain.
func (c *Cluster) trusts(cert *x509.Certificate, chain []*x509.Certificate, depth int) bool {
	for _, ca := range c.cas {
		if cert.Equal(ca.cert) || cert.CheckSignatureFrom(ca.cert) == nil {
			return true
		}
	}
	if depth == 0 {
		return false
	}
	for _, parent := range chain {
		if !parent.Equal(cert) && cert.CheckSignatureFrom(parent) == nil && c.trusts(parent, chain, depth-1) {
			return true
		}
	}
	return false
}

// caNames lists the CAs for messages.
func (c *Cluster) caNames() string {
	var names []string
	for _, ca := range c.cas {
		if len(names) == 0 || names[len(names)-1] != ca.name {
			names = append(names, ca.name)
		}
	}
	return strings.Join(names, ", ")
}

// subject names a certificate: its common name, else its whole subject.
func subject(cert *x509.Certificate) string {
	if cert.Subject.CommonName != "" {
		return cert.Subject.CommonName
	}
	return cert.Subject.String()
}

// The keys that name a cluster, as kiln writes them in metadata.json and
// the cluster-config ConfigMap.
const (
	keyClusterName = "clusterName"
	keyClusterID   = "clusterID"
	keyInfraID     = "infraID"
)

// names checks the cluster name, cluster ID and infra ID that YAML or JSON
// data names, if any.
func (w *walker) names(data []byte, item string) {
	if !w.c.checkNames || !(bytes.Contains(data, []byte(keyClusterName)) || bytes.Contains(data, []byte(keyClusterID)) ||
		bytes.Contains(data, []byte(keyInfraID))) {
		return
	}
	want := map[string]string{keyClusterName: w.c.name, keyClusterID: w.c.uuid, keyInfraID: w.c.infraID}
	for _, v := range yamlkeys.Values(data, keyClusterName, keyClusterID, keyInfraID) {
		if exp := want[v.Key]; exp != "" && v.Value != exp {
			w.mismatch(join(item, v.Field.String()), "%s is %q, this cluster's is %q", v.Key, v.Value, exp)
		}
	}
}
