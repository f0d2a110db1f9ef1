package bootstraptoken

import (
	"context"
	"time"

	"github.com/kiln-project/kiln/graph"
	"github.com/kiln-project/kiln/ignition/mcsauth"
)

var _ graph.Asset = (*ConfigTokens)(nil)

// ConfigTokens are the machine-config server's bearer tokens, one per
// role: master.ign carries Master and worker.ign carries Worker (as an HTTP
// header on the config they merge), and the server gives a role's full
// config only to a request presenting that role's token. Both are accepted
// until the bootstrap token expires, since no machine can join with its
// config after that. They are secrets: never log them.
type ConfigTokens struct {
	// Master opens /config/master (served by the bootstrap machine only).
	Master string `json:"master"`
	// Worker opens /config/worker (bootstrap machine, then masters).
	Worker string `json:"worker"`
	// Expiration is when the servers stop accepting both.
	Expiration time.Time `json:"expiration"`
}

// ID implements graph.Asset.
func (*ConfigTokens) ID() string { return "machine-config-tokens" }

// Name implements graph.Asset.
func (*ConfigTokens) Name() string { return "machine-config server tokens" }

// Dependencies implements graph.Asset.
func (*ConfigTokens) Dependencies() []graph.Asset { return []graph.Asset{&BootstrapToken{}} }

// Generate draws both tokens from crypto/rand; they expire with the
// bootstrap token.
func (c *ConfigTokens) Generate(_ context.Context, p graph.Parents) error {
	tok := &BootstrapToken{}
	if err := p.Get(tok); err != nil {
		return err
	}
	var err error
	if c.Master, err = mcsauth.NewToken(); err != nil {
		return err
	}
	if c.Worker, err = mcsauth.NewToken(); err != nil {
		return err
	}
	c.Expiration = tok.Expiration
	return nil
}

// Token returns the token of role ("master" or "worker"); "" for another.
func (c *ConfigTokens) Token(role string) string {
	switch role {
	case "master":
		return c.Master
	case "worker":
		return c.Worker
	}
	return ""
}

// File returns the server's token file accepting the tokens of roles.
func (c *ConfigTokens) File(roles ...string) []byte {
	entries := make([]mcsauth.Entry, 0, len(roles))
	for _, r := range roles {
		entries = append(entries, mcsauth.NewEntry(r, c.Token(r), c.Expiration))
	}
	return mcsauth.Format(entries...)
}

// String names the tokens without their secrets.
func (c *ConfigTokens) String() string { return "machine-config server tokens (redacted)" }

// GoString keeps the secrets out of %#v output.
func (c *ConfigTokens) GoString() string { return c.String() }
