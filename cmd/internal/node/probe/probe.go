// Package probe is a small network and storage test tool for pods: the
// cluster has no general-purpose image offline, so end-to-end tests run the
// kiln binary (bound into every machine) in a pod to serve HTTP, resolve
// names through cluster DNS, fetch URLs and keep a file on a volume.
package probe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"time"
)

// Serve answers every HTTP request on addr with body until ctx ends.
func Serve(ctx context.Context, addr, body string) error {
	srv := &http.Server{
		Addr:              addr,
		ReadHeaderTimeout: 5 * time.Second,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			_, _ = io.WriteString(w, body)
		}),
	}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Resolve looks name up with the pod's resolver (cluster DNS) and returns
// its addresses.
func Resolve(ctx context.Context, name string) ([]string, error) {
	return net.DefaultResolver.LookupHost(ctx, name)
}

// Get fetches url and returns the body of a 200 response.
func Get(ctx context.Context, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return string(body), nil
}

// Persist returns the content of the file at path when it exists (found is
// true); otherwise it writes body there, synced to disk, and returns body.
// On a persistent volume, a pod's second life finds what its first wrote.
func Persist(path, body string) (content string, found bool, err error) {
	data, err := os.ReadFile(path)
	if err == nil {
		return string(data), true, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", false, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return "", false, err
	}
	if _, err := io.WriteString(f, body); err != nil {
		f.Close()
		return "", false, err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return "", false, err
	}
	return body, false, f.Close()
}
