package certs

import (
	"bytes"
	"crypto/x509"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"k8s.io/apimachinery/pkg/util/duration"
)

// ExpiringWithin is how close to its expiry a certificate is flagged.
const ExpiringWithin = 30 * 24 * time.Hour

// Status markers of the table.
const (
	StatusOK       = "ok"
	StatusExpiring = "EXPIRING"
	StatusExpired  = "EXPIRED"
	StatusUnknown  = "UNKNOWN"
)

// Entry is one certificate found, or the reason one could not be read.
type Entry struct {
	// Name says where the certificate is, e.g. tls/root-ca (the state
	// file's asset), auth/kubeconfig (user admin), node/w0 kubelet serving.
	Name string
	// Cert is the certificate; nil when Err is set.
	Cert *x509.Certificate
	// Err says why the certificate could not be read.
	Err error
}

// Status is the entry's marker at now.
func (e Entry) Status(now time.Time) string {
	switch {
	case e.Cert == nil:
		return StatusUnknown
	case !now.Before(e.Cert.NotAfter):
		return StatusExpired
	case e.Cert.NotAfter.Sub(now) <= ExpiringWithin:
		return StatusExpiring
	}
	return StatusOK
}

// WriteTable prints entries as a table: NAME, EXPIRES, RESIDUAL TIME, CA,
// STATUS. CA names the entry (of cas, typically the same list) whose
// certificate signed it; "self-signed", or the issuer's CN when no entry did.
func WriteTable(w io.Writer, entries, cas []Entry, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tEXPIRES\tRESIDUAL TIME\tCA\tSTATUS")
	for _, e := range entries {
		if e.Cert == nil {
			fmt.Fprintf(tw, "%s\t-\t-\t-\t%s: %v\n", e.Name, StatusUnknown, e.Err)
			continue
		}
		residual := "expired"
		if left := e.Cert.NotAfter.Sub(now); left > 0 {
			residual = duration.ShortHumanDuration(left)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", e.Name, e.Cert.NotAfter.UTC().Format("Jan 02, 2006 15:04 MST"),
			residual, issuerName(e, cas), e.Status(now))
	}
	return tw.Flush()
}

// issuerName names the CA that signed e's certificate.
func issuerName(e Entry, cas []Entry) string {
	for _, ca := range cas {
		if ca.Cert == nil || !ca.Cert.IsCA || ca.Cert.Equal(e.Cert) {
			continue
		}
		if e.Cert.CheckSignatureFrom(ca.Cert) == nil {
			return ca.Name
		}
	}
	c := e.Cert
	if bytes.Equal(c.RawIssuer, c.RawSubject) && c.CheckSignature(c.SignatureAlgorithm, c.RawTBSCertificate, c.Signature) == nil {
		return "self-signed"
	}
	if e.Cert.Issuer.CommonName != "" {
		return "CN=" + e.Cert.Issuer.CommonName
	}
	return "unknown"
}
