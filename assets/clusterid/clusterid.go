package clusterid

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"strings"

	"github.com/kiln-project/kiln/assets/installconfig"
	"github.com/kiln-project/kiln/graph"
)

var _ graph.Asset = (*ClusterID)(nil)

// ID is the cluster ID asset's ID in the state file.
const ID = "cluster-id"

const (
	// maxBaseLength bounds the part of the infra ID taken from the cluster
	// name; install-config validation keeps names within it.
	maxBaseLength = installconfig.MaxNameLength
	// suffixLength is the number of random characters after the name.
	suffixLength = 5
	// suffixAlphabet is what the random suffix is drawn from.
	suffixAlphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
)

// ClusterID identifies one cluster.
type ClusterID struct {
	// UUID is a random (version 4) UUID.
	UUID string `json:"uuid"`
	// InfraID is <sanitized name>-<5 random [a-z0-9]>, e.g. "dev-7x2kq".
	InfraID string `json:"infraID"`
}

// ID implements graph.Asset.
func (*ClusterID) ID() string { return ID }

// Name implements graph.Asset.
func (*ClusterID) Name() string { return "Cluster ID" }

// Dependencies implements graph.Asset.
func (*ClusterID) Dependencies() []graph.Asset {
	return []graph.Asset{&installconfig.InstallConfig{}}
}

// Generate implements graph.Asset.
func (a *ClusterID) Generate(_ context.Context, p graph.Parents) error {
	ic := &installconfig.InstallConfig{}
	if err := p.Get(ic); err != nil {
		return err
	}
	return a.generate(ic.Config.Metadata.Name, rand.Reader)
}

func (a *ClusterID) generate(name string, r io.Reader) error {
	u, err := newUUID(r)
	if err != nil {
		return err
	}
	infra, err := newInfraID(name, r)
	if err != nil {
		return err
	}
	a.UUID, a.InfraID = u, infra
	return nil
}

// newInfraID sanitizes name to lower-case [a-z0-9-], truncates it and adds
// a dash and a random suffix.
func newInfraID(name string, r io.Reader) (string, error) {
	base := strings.Map(func(c rune) rune {
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
			return c
		case c >= 'A' && c <= 'Z':
			return c - 'A' + 'a'
		}
		return '-'
	}, name)
	if len(base) > maxBaseLength {
		base = base[:maxBaseLength]
	}
	base = strings.Trim(base, "-")
	suffix, err := randomString(r, suffixLength)
	if err != nil {
		return "", err
	}
	if base == "" {
		return suffix, nil
	}
	return base + "-" + suffix, nil
}

// randomString draws n characters of suffixAlphabet without modulo bias.
func randomString(r io.Reader, n int) (string, error) {
	const limit = 256 - 256%len(suffixAlphabet)
	out := make([]byte, 0, n)
	buf := make([]byte, 1)
	for len(out) < n {
		if _, err := io.ReadFull(r, buf); err != nil {
			return "", fmt.Errorf("reading random bytes: %w", err)
		}
		if int(buf[0]) < limit {
			out = append(out, suffixAlphabet[int(buf[0])%len(suffixAlphabet)])
		}
	}
	return string(out), nil
}

// newUUID returns a random RFC 9562 version 4 UUID.
func newUUID(r io.Reader) (string, error) {
	var b [16]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return "", fmt.Errorf("reading random bytes: %w", err)
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16]), nil
}
