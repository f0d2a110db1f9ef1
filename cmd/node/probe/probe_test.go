package probe

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// freeAddr returns a loopback address with a port nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// eventually calls f until it succeeds, for up to a second (a server
// started in a goroutine is listening by then), and returns its last error.
func eventually(f func() error) (err error) {
	for i := 0; i < 50; i++ {
		if err = f(); err == nil {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return err
}

func TestServeAndGet(t *testing.T) {
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, addr, "hello from kiln") }()
	var body string
	err := eventually(func() (err error) {
		body, err = Get(context.Background(), "http://"+addr+"/")
		return err
	})
	if body != "hello from kiln" {
		t.Fatalf("body = %q, err = %v", body, err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if addrs, err := Resolve(context.Background(), "localhost"); err != nil || len(addrs) == 0 {
		t.Fatalf("resolve localhost: %v %v", addrs, err)
	}
}

func TestPersist(t *testing.T) {
	path := filepath.Join(t.TempDir(), "probe.txt")
	if got, found, err := Persist(path, "first"); err != nil || found || got != "first" {
		t.Fatalf("first Persist = %q, %v, %v; want it to write", got, found, err)
	}
	if got, found, err := Persist(path, "second"); err != nil || !found || got != "first" {
		t.Fatalf("second Persist = %q, %v, %v; want it to read what the first wrote", got, found, err)
	}
	if _, _, err := Persist(filepath.Join(t.TempDir(), "missing", "probe.txt"), "x"); err == nil {
		t.Error("Persist into a missing directory succeeded")
	}
}

// TestWatch: each attempt is a line, "ok" while the server answers and
// "fail" once it is gone; a new connection each time.
func TestWatch(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns atomic.Int64
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("x")) }),
		ConnState: func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				conns.Add(1)
			}
		},
	}
	go func() { _ = srv.Serve(ln) }()
	var out lockedBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Watch(ctx, "http://"+ln.Addr().String()+"/", 20*time.Millisecond, &out) }()
	waitLines(t, &out, func(lines []string) bool { return len(lines) >= 3 })
	srv.Close()
	waitLines(t, &out, func(lines []string) bool { return strings.Contains(lines[len(lines)-1], " fail ") })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if !strings.HasSuffix(lines[0], " ok") {
		t.Errorf("first line %q, want ok", lines[0])
	}
	if oks := strings.Count(out.String(), " ok\n"); int(conns.Load()) < oks {
		t.Errorf("%d answers on %d connections: keep-alive reused one", oks, conns.Load())
	}
}

// lockedBuffer is a bytes.Buffer safe for one writer and one reader.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func waitLines(t *testing.T, b *lockedBuffer, done func([]string) bool) {
	t.Helper()
	for i := 0; i < 250; i++ {
		if s := strings.TrimSpace(b.String()); s != "" && done(strings.Split(s, "\n")) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("watch output never got there:\n%s", b.String())
}

func TestServeSizeAndDownload(t *testing.T) {
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = ServeSize(ctx, addr, 3<<20+5) }()
	var n int64
	var d time.Duration
	err := eventually(func() (err error) {
		n, d, err = Download(context.Background(), "http://"+addr+"/")
		return err
	})
	if err != nil || n != 3<<20+5 || d <= 0 {
		t.Fatalf("Download = %d bytes in %s, %v; want %d bytes", n, d, err, 3<<20+5)
	}
}

// Retry stops at the first success, gives up after within with the last
// error, and with within 0 calls once.
func TestRetry(t *testing.T) {
	ctx := context.Background()
	calls := 0
	tries, err := Retry(ctx, time.Minute, time.Millisecond, func() error {
		calls++
		if calls < 3 {
			return fmt.Errorf("try %d", calls)
		}
		return nil
	})
	if err != nil || tries != 3 || calls != 3 {
		t.Errorf("until success: tries %d, calls %d, err %v; want 3, 3, nil", tries, calls, err)
	}
	calls = 0
	tries, err = Retry(ctx, 30*time.Millisecond, 5*time.Millisecond, func() error { calls++; return fmt.Errorf("try %d", calls) })
	if err == nil || err.Error() != fmt.Sprintf("try %d", calls) || tries != calls || calls < 2 {
		t.Errorf("never succeeding: tries %d, calls %d, err %v; want the last error after several tries", tries, calls, err)
	}
	calls = 0
	tries, err = Retry(ctx, 0, time.Millisecond, func() error { calls++; return errors.New("no") })
	if err == nil || tries != 1 || calls != 1 {
		t.Errorf("within 0: tries %d, calls %d, err %v; want one failed call", tries, calls, err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	calls = 0
	if tries, _ := Retry(cctx, time.Minute, time.Hour, func() error { calls++; return errors.New("no") }); tries != 1 {
		t.Errorf("cancelled context: %d tries, want 1", tries)
	}
}
