// Package mcsauth is the contract between the Ignition configs kiln emits
// and the machine-config server that serves them: a machine's pointer config
// carries a per-role bearer token in an HTTP header, and the server keeps
// only the tokens' SHA-256 hashes, each with the role it opens and when it
// stops being accepted, in a file of its config directory.
//
// The token file has one line per role: "<role> <sha256 hex> <expiry RFC
// 3339>". A role that has no line, or whose line expired, is served to no
// one.
package mcsauth

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"
	"time"
)

// TokenFile is the name of the token file in the server's config directory.
const TokenFile = "tokens"

// Header is the HTTP header that carries the token, as "Bearer <token>".
const Header = "Authorization"

// tokenBytes is the entropy of a token: 256 bits.
const tokenBytes = 32

var rolePattern = regexp.MustCompile(`^[a-z][a-z0-9-]{0,62}$`)

// NewToken draws a token from crypto/rand: 256 bits, base64url without
// padding (43 characters).
func NewToken() (string, error) {
	b := make([]byte, tokenBytes)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("read random bytes: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// HeaderValue is the Authorization header value that presents token.
func HeaderValue(token string) string { return "Bearer " + token }

// Entry is one line of the token file: the hash of the token that opens
// Role's config, accepted until Expires.
type Entry struct {
	Role    string
	Hash    [sha256.Size]byte
	Expires time.Time
}

// NewEntry is the entry for token, opening role until expires.
func NewEntry(role, token string, expires time.Time) Entry {
	return Entry{Role: role, Hash: sha256.Sum256([]byte(token)), Expires: expires.UTC().Truncate(time.Second)}
}

// Format renders entries as a token file.
func Format(entries ...Entry) []byte {
	var b bytes.Buffer
	for _, e := range entries {
		fmt.Fprintf(&b, "%s %s %s\n", e.Role, hex.EncodeToString(e.Hash[:]), e.Expires.UTC().Format(time.RFC3339))
	}
	return b.Bytes()
}

// Parse reads a token file; a malformed line is an error naming it.
func Parse(data []byte) ([]Entry, error) {
	var out []Entry
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 3 || !rolePattern.MatchString(f[0]) {
			return nil, fmt.Errorf("%s line %d: want \"<role> <sha256 hex> <expiry>\"", TokenFile, n)
		}
		e := Entry{Role: f[0]}
		if h, err := hex.DecodeString(f[1]); err != nil || len(h) != sha256.Size {
			return nil, fmt.Errorf("%s line %d: the hash is not %d hex bytes", TokenFile, n, sha256.Size)
		} else {
			copy(e.Hash[:], h)
		}
		exp, err := time.Parse(time.RFC3339, f[2])
		if err != nil {
			return nil, fmt.Errorf("%s line %d: expiry: %w", TokenFile, n, err)
		}
		e.Expires = exp
		out = append(out, e)
	}
	return out, sc.Err()
}

// Verdict is what Check decides about a request.
type Verdict int

// Verdicts of Check.
const (
	// Allowed: the token opens the role and has not expired.
	Allowed Verdict = iota
	// Unauthenticated: no token, or one that opens no role (HTTP 401).
	Unauthenticated
	// Forbidden: the token opens another role, or its entry expired (403).
	Forbidden
)

// Check decides whether the Authorization header value header opens role's
// config at now. Every entry is compared in constant time, so the answer
// takes as long for a good token as for a bad one.
func Check(entries []Entry, role, header string, now time.Time) Verdict {
	token, ok := strings.CutPrefix(header, "Bearer ")
	if !ok || token == "" {
		return Unauthenticated
	}
	sum := sha256.Sum256([]byte(token))
	verdict := Unauthenticated
	for _, e := range entries {
		if subtle.ConstantTimeCompare(sum[:], e.Hash[:]) != 1 {
			continue
		}
		switch {
		case e.Role != role, !now.Before(e.Expires):
			if verdict == Unauthenticated {
				verdict = Forbidden
			}
		default:
			verdict = Allowed
		}
	}
	return verdict
}
