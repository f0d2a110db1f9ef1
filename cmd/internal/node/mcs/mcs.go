// Package mcs is the machine-config server: it serves the full Ignition
// config of each role over TLS on :22623 to machines whose pointer config
// merges https://api-int.<cluster>:22623/config/<role>.
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
)

// File names inside the config directory.
const (
	CertFile = "tls.crt"
	KeyFile  = "tls.key"
)

var rolePattern = regexp.MustCompile(`^[a-z][a-z0-9-]{0,62}$`)

// Handler serves GET /config/<role> from <dir>/<role>.ign and GET /healthz.
func Handler(dir string, log logrus.FieldLogger) http.Handler {
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
		data, err := os.ReadFile(filepath.Join(dir, role+".ign"))
		if errors.Is(err, os.ErrNotExist) {
			http.NotFound(w, r)
			return
		}
		if err != nil {
			log.Errorf("config %s: %v", role, err)
			http.Error(w, "internal error", http.StatusInternalServerError)
			return
		}
		log.Infof("serving %s config to %s", role, r.RemoteAddr)
		w.Header().Set("Content-Type", "application/vnd.coreos.ignition+json;version=3.3.0")
		_, _ = w.Write(data)
	})
	return mux
}

// Serve runs the server on addr until ctx ends. The certificate is re-read
// on every handshake so a renewed one is picked up.
func Serve(ctx context.Context, addr, dir string, log logrus.FieldLogger) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler:           Handler(dir, log),
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
