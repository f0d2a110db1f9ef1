package mcs

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/sirupsen/logrus"
)

func TestHandler(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "worker.ign"), []byte(`{"ignition":{"version":"3.3.0"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	log := logrus.New()
	log.SetOutput(io.Discard)
	srv := httptest.NewServer(Handler(dir, log))
	defer srv.Close()
	for _, tc := range []struct {
		path string
		code int
		body string
	}{
		{"/config/worker", 200, `{"ignition":{"version":"3.3.0"}}`},
		{"/config/master", 404, ""},
		{"/config/..%2ftls.key", 404, ""},
		{"/healthz", 200, "ok"},
	} {
		resp, err := http.Get(srv.URL + tc.path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.code || (tc.body != "" && string(body) != tc.body) {
			t.Errorf("GET %s = %d %q, want %d %q", tc.path, resp.StatusCode, body, tc.code, tc.body)
		}
	}
}
