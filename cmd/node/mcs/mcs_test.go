package mcs

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/kiln-project/kiln/ignition/mcsauth"
)

// config is the test config of role.
func config(role string) string { return `{"ignition":{"version":"3.3.0"},"_role":"` + role + `"}` }

// serve starts the handler on a config directory holding worker.ign and,
// when tokens is not nil, that token file, and the configs of roles.
func serve(t *testing.T, tokens []byte, now time.Time, roles ...string) *httptest.Server {
	t.Helper()
	return serveWith(t, tokens, now, nil, roles...)
}

// serveWith is serve with an overlay.
func serveWith(t *testing.T, tokens []byte, now time.Time, overlay Overlay, roles ...string) *httptest.Server {
	t.Helper()
	dir := t.TempDir()
	for _, role := range roles {
		if err := os.WriteFile(filepath.Join(dir, role+".ign"), []byte(config(role)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if tokens != nil {
		if err := os.WriteFile(filepath.Join(dir, mcsauth.TokenFile), tokens, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	log := logrus.New()
	log.SetOutput(io.Discard)
	srv := httptest.NewServer(Handler(dir, func() time.Time { return now }, overlay, log))
	t.Cleanup(srv.Close)
	return srv
}

func get(t *testing.T, url, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set(mcsauth.Header, mcsauth.HeaderValue(token))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func TestHandler(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	const master, worker, expired = "master-token", "worker-token", "expired-token"
	tokens := mcsauth.Format(
		mcsauth.NewEntry("master", master, now.Add(time.Hour)),
		mcsauth.NewEntry("worker", worker, now.Add(time.Hour)),
		mcsauth.NewEntry("worker", expired, now),
	)
	srv := serve(t, tokens, now, "master", "worker")
	for _, tc := range []struct {
		name, path, token string
		code              int
		body              string
	}{
		{"worker token, worker config", "/config/worker", worker, 200, config("worker")},
		{"master token, master config", "/config/master", master, 200, config("master")},
		{"anonymous", "/config/worker", "", 401, ""},
		{"unknown token", "/config/worker", "guess", 401, ""},
		{"worker token, master config", "/config/master", worker, 403, ""},
		{"master token, worker config", "/config/worker", master, 403, ""},
		{"expired token", "/config/worker", expired, 403, ""},
		{"path escape", "/config/..%2ftls.key", worker, 404, ""},
		{"health is anonymous", "/healthz", "", 200, "ok"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := get(t, srv.URL+tc.path, tc.token)
			if code != tc.code || (tc.code == 200 && body != tc.body) {
				t.Errorf("GET %s = %d %q, want %d %q", tc.path, code, body, tc.code, tc.body)
			}
			if code != 200 && strings.Contains(body, "ignition") {
				t.Errorf("GET %s refused with %d but returned the config", tc.path, code)
			}
		})
	}
}

// A server without a token file serves no config to anyone, and one whose
// token file is broken serves none either.
func TestHandlerWithoutTokens(t *testing.T) {
	now := time.Now()
	for name, tokens := range map[string][]byte{"no token file": nil, "broken token file": []byte("worker nothex later\n")} {
		t.Run(name, func(t *testing.T) {
			srv := serve(t, tokens, now, "worker")
			if code, body := get(t, srv.URL+"/config/worker", "any"); code == 200 || body == config("worker") {
				t.Errorf("GET /config/worker = %d %q, want a refusal", code, body)
			}
		})
	}
}

// A master's server holds only the worker config. A request for the master
// config, whatever its token, gets 503 and Retry-After, which Ignition
// retries (it gives up on any answer below 500), so a master whose request
// the load balancer sent to another master retries until it reaches the
// bootstrap machine instead of failing its first boot.
func TestHandlerRoleNotHere(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	const master, worker = "master-token", "worker-token"
	tokens := mcsauth.Format(mcsauth.NewEntry("worker", worker, now.Add(time.Hour)))
	srv := serve(t, tokens, now, "worker")
	for _, token := range []string{master, worker, ""} {
		req, err := http.NewRequest(http.MethodGet, srv.URL+"/config/master", nil)
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set(mcsauth.Header, mcsauth.HeaderValue(token))
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
			t.Errorf("token %q: GET /config/master = %d (Retry-After %q), want 503 with Retry-After", token, resp.StatusCode, resp.Header.Get("Retry-After"))
		}
	}
	if code, body := get(t, srv.URL+"/config/worker", worker); code != 200 || body != config("worker") {
		t.Errorf("GET /config/worker = %d %q, want the worker config", code, body)
	}
}

// TestOverlay serves a role's config through the overlay (a master's
// server merges the pool's rendered config in), and the file as it is when
// the overlay fails: a machine must still boot.
func TestOverlay(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	tokens := mcsauth.Format(mcsauth.NewEntry("worker", "w", now.Add(time.Hour)), mcsauth.NewEntry("infra", "i", now.Add(time.Hour)))
	overlay := func(_ context.Context, role string, cfg []byte) ([]byte, error) {
		if role == "infra" {
			return nil, errors.New("API unreachable")
		}
		return append(cfg, []byte(" +"+role+" pool")...), nil
	}
	srv := serveWith(t, tokens, now, overlay, "worker", "infra")
	if code, body := get(t, srv.URL+"/config/worker", "w"); code != 200 || body != config("worker")+" +worker pool" {
		t.Errorf("worker: %d %q", code, body)
	}
	if code, body := get(t, srv.URL+"/config/infra", "i"); code != 200 || body != config("infra") {
		t.Errorf("infra with a failing overlay: %d %q, want the file as it is", code, body)
	}
	if code, _ := get(t, srv.URL+"/config/worker", ""); code != 401 {
		t.Errorf("anonymous with an overlay: %d", code)
	}
}
