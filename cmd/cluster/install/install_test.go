package install

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/kiln-project/kiln/assets/installconfig/types"
	"github.com/kiln-project/kiln/cmd/cluster/exitcode"
	"github.com/kiln-project/kiln/platforms"
)

func TestTimeouts(t *testing.T) {
	cfg := types.ResolvedTimeouts{API: 5 * time.Minute, Bootstrap: 45 * time.Minute, Install: 30 * time.Minute}
	got, err := timeouts(cfg, Timeouts{API: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	want := Timeouts{API: time.Minute, Bootstrap: 45 * time.Minute, Install: 30 * time.Minute}
	if got != want {
		t.Fatalf("timeouts = %+v, want %+v (flags win over install-config)", got, want)
	}
	if _, err := timeouts(cfg, Timeouts{Install: -time.Minute}); exitcode.Of(err) != exitcode.Input || !strings.Contains(err.Error(), "--install-timeout") {
		t.Fatalf("negative flag: %v", err)
	}
}

func TestCheckCredentials(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	c := &Cluster{TokenExpiry: now.Add(13 * time.Hour)}
	if err := c.checkCredentials(now); err != nil {
		t.Fatalf("13 h left refused: %v", err)
	}
	c.TokenExpiry = now.Add(11 * time.Hour)
	err := c.checkCredentials(now)
	if err == nil || !strings.Contains(err.Error(), "too old") {
		t.Fatalf("11 h left: %v", err)
	}
}

// fakeProv is a provisioner that destroys without error.
type fakeProv struct{ platforms.Provisioner }

func (*fakeProv) Destroy(context.Context, string, string) error { return nil }
