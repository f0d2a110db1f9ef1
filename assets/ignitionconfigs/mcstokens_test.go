package ignitionconfigs_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/coreos/ignition/v2/config/v3_3/types"

	"github.com/kiln-project/kiln/assets/ignitionconfigs"
	"github.com/kiln-project/kiln/assets/targets"
	"github.com/kiln-project/kiln/graph/installdir"
	"github.com/kiln-project/kiln/ignition"
	"github.com/kiln-project/kiln/ignition/mcsauth"
)

// The pointer configs present their role's token, and the machine-config
// servers accept each token for its own role only: the bootstrap machine
// for both roles, a master for workers only.
func TestPointerTokensOpenOnlyTheirRole(t *testing.T) {
	dir := newDir(t)
	persist(t, dir, targets.IgnitionConfigs())
	header := map[string]string{}
	for _, role := range []string{ignitionconfigs.RoleMaster, ignitionconfigs.RoleWorker} {
		path := filepath.Join(dir, installdir.Ignition(role))
		info, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if info.Mode().Perm() != 0o600 {
			t.Errorf("%s.ign carries a credential and has mode %04o, want 0600", role, info.Mode().Perm())
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		header[role] = authHeader(t, role, parse(t, raw))
	}
	if header[ignitionconfigs.RoleMaster] == header[ignitionconfigs.RoleWorker] {
		t.Fatal("master.ign and worker.ign present the same token")
	}
	boot := generatedConfigIn(t, dir)
	soon := time.Now().Add(time.Minute)
	for _, tc := range []struct {
		server       string
		config       types.Config
		role, header string
		want         mcsauth.Verdict
	}{
		{"bootstrap", boot, ignitionconfigs.RoleMaster, header[ignitionconfigs.RoleMaster], mcsauth.Allowed},
		{"bootstrap", boot, ignitionconfigs.RoleWorker, header[ignitionconfigs.RoleWorker], mcsauth.Allowed},
		{"bootstrap", boot, ignitionconfigs.RoleMaster, header[ignitionconfigs.RoleWorker], mcsauth.Forbidden},
		{"bootstrap", boot, ignitionconfigs.RoleWorker, header[ignitionconfigs.RoleMaster], mcsauth.Forbidden},
		{"master", served(t, boot, ignitionconfigs.RoleMaster), ignitionconfigs.RoleWorker, header[ignitionconfigs.RoleWorker], mcsauth.Allowed},
		{"master", served(t, boot, ignitionconfigs.RoleMaster), ignitionconfigs.RoleMaster, header[ignitionconfigs.RoleMaster], mcsauth.Unauthenticated},
	} {
		if got := mcsauth.Check(tokenFile(t, tc.server, tc.config), tc.role, tc.header, soon); got != tc.want {
			t.Errorf("%s server, %s config with the %s.ign token: %v, want %v", tc.server, tc.role, tc.role, got, tc.want)
		}
	}
	// The tokens stop opening anything when the bootstrap credentials expire.
	late := time.Now().Add(25 * time.Hour)
	if got := mcsauth.Check(tokenFile(t, "bootstrap", boot), ignitionconfigs.RoleWorker, header[ignitionconfigs.RoleWorker], late); got == mcsauth.Allowed {
		t.Error("the worker token is still accepted after the bootstrap credentials expired")
	}
}

func generatedConfigIn(t *testing.T, dir string) types.Config {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, "bootstrap.ign"))
	if err != nil {
		t.Fatal(err)
	}
	return parse(t, raw)
}

// authHeader returns the Authorization header of the pointer's one merge.
func authHeader(t *testing.T, role string, c types.Config) string {
	t.Helper()
	if len(c.Ignition.Config.Merge) != 1 {
		t.Fatalf("%s.ign merges %d configs, want 1", role, len(c.Ignition.Config.Merge))
	}
	for _, h := range c.Ignition.Config.Merge[0].HTTPHeaders {
		if h.Name == mcsauth.Header && h.Value != nil {
			return *h.Value
		}
	}
	t.Fatalf("%s.ign sends no %s header", role, mcsauth.Header)
	return ""
}

func tokenFile(t *testing.T, server string, c types.Config) []mcsauth.Entry {
	t.Helper()
	raw, ok, err := ignition.FileContents(c, "/etc/kiln/mcs/"+mcsauth.TokenFile)
	if err != nil || !ok {
		t.Fatalf("%s config has no token file: %v", server, err)
	}
	entries, err := mcsauth.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return entries
}
