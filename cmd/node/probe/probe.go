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
	"strings"
	"time"
)

// Serve answers every HTTP request on addr with body until ctx ends.
func Serve(ctx context.Context, addr, body string) error {
	return serve(ctx, addr, func(w io.Writer) { _, _ = io.WriteString(w, body) })
}

// ServeSize answers every HTTP request on addr with size zero bytes until
// ctx ends: the server side of a throughput measurement (Download).
func ServeSize(ctx context.Context, addr string, size int64) error {
	return serve(ctx, addr, func(w io.Writer) { _, _ = io.CopyN(w, zeros{}, size) })
}

// zeros reads as an endless run of zero bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// serve answers every HTTP request on addr with what write writes until
// ctx ends.
func serve(ctx context.Context, addr string, write func(io.Writer)) error {
	srv := &http.Server{
		Addr:              addr,
		ReadHeaderTimeout: 5 * time.Second,
		Handler:           http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { write(w) }),
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

// Download fetches url, reads and discards the whole body, and returns
// its length and how long the transfer took from the request on.
func Download(ctx context.Context, url string) (int64, time.Duration, error) {
	start := time.Now()
	n, err := fetch(ctx, http.DefaultClient, url, io.Discard, 0)
	return n, time.Since(start), err
}

// Resolve looks name up with the pod's resolver (cluster DNS) and returns
// its addresses.
func Resolve(ctx context.Context, name string) ([]string, error) {
	return net.DefaultResolver.LookupHost(ctx, name)
}

// Get fetches url and returns the body of a 200 response (at most 64 KiB).
func Get(ctx context.Context, url string) (string, error) {
	var body strings.Builder
	if _, err := fetch(ctx, http.DefaultClient, url, &body, 1<<16); err != nil {
		return "", err
	}
	return body.String(), nil
}

// fetch GETs url with client and copies the body of a 200 response to w,
// at most limit bytes when limit is positive; it returns the bytes copied.
func fetch(ctx context.Context, client *http.Client, url string, w io.Writer, limit int64) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	var r io.Reader = resp.Body
	if limit > 0 {
		r = io.LimitReader(r, limit)
	}
	return io.Copy(w, r)
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

// Watch fetches url every interval until ctx ends, each time on a new
// connection (an established one would outlive a NetworkPolicy that denies
// new ones), and writes one line per attempt to w: "<unix ms> ok" or
// "<unix ms> fail <error>". An attempt gets at most the interval, and at
// least a second.
func Watch(ctx context.Context, url string, interval time.Duration, w io.Writer) error {
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	timeout := max(interval, time.Second)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		actx, cancel := context.WithTimeout(ctx, timeout)
		err := getOnce(actx, client, url)
		cancel()
		if ctx.Err() != nil {
			return nil
		}
		line := fmt.Sprintf("%d ok\n", time.Now().UnixMilli())
		if err != nil {
			line = fmt.Sprintf("%d fail %v\n", time.Now().UnixMilli(), err)
		}
		if _, err := io.WriteString(w, line); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// getOnce fetches url with client and fails unless the answer is a 200.
func getOnce(ctx context.Context, client *http.Client, url string) error {
	_, err := fetch(ctx, client, url, io.Discard, 1<<16)
	return err
}

// Retry calls try until it succeeds, ctx ends, or within has passed since
// the first call, waiting every between calls; within 0 calls it once. It
// returns how many calls were made and try's last error. A pod's first
// try can fail for reasons that pass within a second (a Service's rules or
// a NetworkPolicy engine's ipset not yet programmed for the new pod):
// retrying in the process costs that second, where a failed container
// costs the kubelet's restart back-off (10 s and more).
func Retry(ctx context.Context, within, every time.Duration, try func() error) (int, error) {
	start := time.Now()
	for tries := 1; ; tries++ {
		err := try()
		if err == nil || time.Since(start) >= within {
			return tries, err
		}
		select {
		case <-ctx.Done():
			return tries, err
		case <-time.After(every):
		}
	}
}
