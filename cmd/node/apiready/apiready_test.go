package apiready

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestWait: a host with the manifest waits until the API server answers
// ok (saying why not meanwhile); one without returns at once; a wait cut
// short names the last answer.
func TestWait(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if calls.Add(1) < 3 {
			http.Error(w, "[-]informer-sync failed", http.StatusInternalServerError)
			return
		}
		w.Write([]byte("ok"))
	}))
	defer srv.Close()
	manifest := filepath.Join(t.TempDir(), "kube-apiserver.yaml")
	if err := os.WriteFile(manifest, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	var log []string
	w := Waiter{URL: srv.URL + "/readyz", Manifest: manifest, Every: time.Millisecond, Log: func(s string) { log = append(log, s) }}
	if err := w.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if calls.Load() != 3 || !strings.Contains(strings.Join(log, "\n"), "not ready: 500 Internal Server Error") || !strings.HasSuffix(log[len(log)-1], "is ready") {
		t.Errorf("%d calls, log %q", calls.Load(), log)
	}

	calls.Store(-1000)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := w.Wait(ctx); err == nil || !strings.Contains(err.Error(), "informer-sync failed") {
		t.Errorf("a wait cut short: %v", err)
	}

	calls.Store(-1000)
	w.Manifest = filepath.Join(t.TempDir(), "none.yaml")
	if err := w.Wait(context.Background()); err != nil || calls.Load() != -1000 {
		t.Errorf("a host without an API server: %v after %d calls", err, calls.Load()+1000)
	}
}
