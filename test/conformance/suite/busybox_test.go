package suite

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/kiln-project/kiln/platforms/nodeimage"
)

func TestBusyboxCmds(t *testing.T) {
	got := busyboxCmds("/c/bb.tar.bz2", "/c/src", 2)
	want := []nodeimage.Command{
		{Path: "tar", Args: []string{"-xjf", "/c/bb.tar.bz2", "-C", "/c/src", "--strip-components=1"}},
		{Path: "make", Args: []string{"defconfig"}, Dir: "/c/src"},
		{Path: "make", Args: []string{"-j2", "busybox"}, Dir: "/c/src"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("busyboxCmds =\n%v\nwant\n%v", got, want)
	}
	// The key does not depend on the number of CPUs of the building host.
	if busyboxKey() != busyboxKey() || !strings.HasSuffix(busyboxCmds("t", "s", 0)[2].Args[0], "-j") {
		t.Error("the job count leaks into the cache key")
	}
}

func TestSetConfig(t *testing.T) {
	in := "# comment\nCONFIG_STATIC=n\n# CONFIG_FOO is not set\nCONFIG_TC=y\nCONFIG_ASH=y\n"
	got := setConfig(in, []string{"CONFIG_STATIC=y", "# CONFIG_TC is not set", "CONFIG_FOO=y", "CONFIG_NEW=y"})
	want := "# comment\nCONFIG_STATIC=y\nCONFIG_FOO=y\n# CONFIG_TC is not set\nCONFIG_ASH=y\nCONFIG_NEW=y\n"
	if got != want {
		t.Errorf("setConfig =\n%s\nwant\n%s", got, want)
	}
}

func TestDownloadChecksDigest(t *testing.T) {
	body := []byte("busybox release")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/pool/bb.tar.bz2" {
			http.NotFound(w, r)
			return
		}
		w.Write(body)
	}))
	defer srv.Close()
	sum := sha256.Sum256(body)
	good := hex.EncodeToString(sum[:])
	dir := t.TempDir()
	path := filepath.Join(dir, "bb.tar.bz2")
	if err := download(context.Background(), srv.URL+"/pool/bb.tar.bz2", good, path); err != nil {
		t.Fatal(err)
	}
	if data, err := os.ReadFile(path); err != nil || string(data) != string(body) {
		t.Errorf("downloaded %q, %v", data, err)
	}
	bad := strings.Repeat("0", 64)
	for _, tc := range []struct{ url, sum, want string }{
		{srv.URL + "/pool/bb.tar.bz2", bad, "SHA-256"},
		{srv.URL + "/pool/missing", good, "404"},
	} {
		path := filepath.Join(dir, "other")
		err := download(context.Background(), tc.url, tc.sum, path)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("download(%s): err = %v, want %q", tc.url, err, tc.want)
		}
		if _, err := os.Stat(path); !os.IsNotExist(err) {
			t.Errorf("download(%s) left %s: %v", tc.url, path, err)
		}
	}
}
