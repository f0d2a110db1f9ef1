// Package mcs is the machine-config server: it serves the full Ignition
// config of each role over TLS on :22623 to machines whose pointer config
// merges https://api-int.<cluster>:22623/config/<role> and presents that
// role's bearer token (package mcsauth). A request without a token that the
// config directory's token file accepts for the role gets no config.
package mcs

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/kiln-project/kiln/ignition/mcsauth"
)

// File names inside the config directory.
const (
	CertFile = "tls.crt"
	KeyFile  = "tls.key"
)

var rolePattern = regexp.MustCompile(`^[a-z][a-z0-9-]{0,62}$`)

// Overlay changes a role's config before it is served: the masters' servers
// merge the role's pool's rendered config in (machineconfig.WithPoolConfig).
type Overlay func(ctx context.Context, role string, config []byte) ([]byte, error)

// Handler serves GET /healthz to anyone, and GET /config/<role> from
// <dir>/<role>.ign (through overlay, when it is not nil; a failing overlay
// is logged and the file served as it is) to a request whose bearer token
// <dir>/tokens accepts for role at now(): 503 to anyone when this server holds no config for role
// (see notHere), else 401 without a token or with one the file does not
// know, 403 with one that opens another role or expired. The token file is read
// on every request, so a role is withdrawn by rewriting it.
func Handler(dir string, now func() time.Time, overlay Overlay, log logrus.FieldLogger) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok"))
	})
	mux.HandleFunc("GET /config/{role}", func(w http.ResponseWriter, r *http.Request) {
		role := r.PathValue("role")
		if !rolePattern.MatchString(role) {
			http.NotFound(w, r)
			return
		}
		file := filepath.Join(dir, role+".ign")
		if _, err := os.Stat(file); errors.Is(err, os.ErrNotExist) {
			notHere(w, r, role, log)
			return
		}
		if !authorized(w, r, dir, role, now(), log) {
			return
		}
		data, err := os.ReadFile(file)
		if errors.Is(err, os.ErrNotExist) {
			notHere(w, r, role, log)
			return
		}
		if err != nil {
			log.Errorf("config %s: %v", role, err)
			http.Error(w, "internal error", http.StatusInternalServerError)
			return
		}
		if overlay != nil {
			ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
			more, err := overlay(ctx, role, data)
			cancel()
			if err != nil {
				log.Warnf("config %s: %v: serving the install-time config; the machine gets its pool's config once it is a Node", role, err)
			} else {
				data = more
			}
		}
		log.Infof("serving %s config to %s", role, r.RemoteAddr)
		w.Header().Set("Content-Type", "application/vnd.coreos.ignition+json;version=3.3.0")
		_, _ = w.Write(data)
	})
	return mux
}

// notHere answers a request for a role this server holds no config for
// with 503 and Retry-After. The servers share one address behind the API
// load balancer, and a master's serves only the worker config: Ignition
// gives up on any answer below 500 but retries a 5xx, so a master's request
// that the balancer sent to another master is retried until it reaches the
// bootstrap machine's server instead of failing the machine's first boot.
func notHere(w http.ResponseWriter, r *http.Request, role string, log logrus.FieldLogger) {
	log.Infof("no %s config here for %s: 503, to be retried", role, r.RemoteAddr)
	w.Header().Set("Retry-After", "1")
	http.Error(w, "no "+role+" config on this server", http.StatusServiceUnavailable)
}

// authorized checks the request's token for role and answers a refused
// request itself. The token is never logged.
func authorized(w http.ResponseWriter, r *http.Request, dir, role string, now time.Time, log logrus.FieldLogger) bool {
	var entries []mcsauth.Entry
	data, err := os.ReadFile(filepath.Join(dir, mcsauth.TokenFile))
	switch {
	case err == nil:
		if entries, err = mcsauth.Parse(data); err != nil {
			log.Errorf("%v: serving no config", err)
			http.Error(w, "internal error", http.StatusInternalServerError)
			return false
		}
	case !errors.Is(err, os.ErrNotExist):
		log.Errorf("token file: %v", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return false
	}
	switch mcsauth.Check(entries, role, r.Header.Get(mcsauth.Header), now) {
	case mcsauth.Allowed:
		return true
	case mcsauth.Forbidden:
		log.Warnf("refused %s config to %s: its token does not open that role now", role, r.RemoteAddr)
		http.Error(w, "forbidden", http.StatusForbidden)
	default:
		log.Warnf("refused %s config to %s: no valid token", role, r.RemoteAddr)
		w.Header().Set("WWW-Authenticate", `Bearer realm="kiln machine-config server"`)
		http.Error(w, "unauthorized", http.StatusUnauthorized)
	}
	return false
}

// Serve runs the server on addr until ctx ends. The certificate is re-read
// on every handshake so a renewed one is picked up.
func Serve(ctx context.Context, addr, dir string, overlay Overlay, log logrus.FieldLogger) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler:           Handler(dir, time.Now, overlay, log),
		ReadHeaderTimeout: 10 * time.Second,
		TLSConfig: &tls.Config{
			MinVersion: tls.VersionTLS12,
			GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
				c, err := tls.LoadX509KeyPair(filepath.Join(dir, CertFile), filepath.Join(dir, KeyFile))
				return &c, err
			},
		},
	}
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	log.Infof("machine-config server listening on %s", ln.Addr())
	if err := srv.ServeTLS(ln, "", ""); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
