package lb

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"
)

// tickServer writes one byte every 20 ms, n times, to every connection,
// then keeps it open without a word until the test ends.
func tickServer(t *testing.T, n int) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { close(done); ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				for range n {
					if _, err := c.Write([]byte{'.'}); err != nil {
						return
					}
					time.Sleep(20 * time.Millisecond)
				}
				<-done
			}()
		}
	}()
	return ln
}

// balancer starts a balancer of one service and returns it with its log.
func balancer(t *testing.T, s Service) (*Balancer, *test.Hook) {
	t.Helper()
	log, hook := test.NewNullLogger()
	b := New(log)
	if err := b.Apply(&Config{Listen: "127.0.0.1", Services: []Service{s}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		b.Shutdown(ctx)
	})
	eventually(t, "a healthy backend", func() bool { return healthyCount(b, s.Name) == 1 })
	return b, hook
}

// active returns how many connections service name proxies.
func active(b *Balancer, name string) int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, svc := range b.services {
		if svc.name == name {
			return svc.active.Load()
		}
	}
	return -1
}

// echo sends msg on c and reads it back.
func echo(c net.Conn, msg string) error {
	c.SetDeadline(time.Now().Add(2 * time.Second))
	defer c.SetDeadline(time.Time{})
	if _, err := c.Write([]byte(msg)); err != nil {
		return err
	}
	buf := make([]byte, len(msg))
	if _, err := io.ReadFull(c, buf); err != nil {
		return err
	}
	if string(buf) != msg {
		return errors.New("echoed " + string(buf))
	}
	return nil
}

// closedWithin reads c until it ends and returns how long that took; it
// fails the test when c is still open after limit.
func closedWithin(t *testing.T, c net.Conn, limit time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	c.SetReadDeadline(start.Add(limit))
	_, err := io.Copy(io.Discard, c)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the connection is still open after %s", limit)
	}
	return time.Since(start)
}

// TestIdleTimeout: a connection on which neither direction moves a byte
// for the idle timeout is closed, both ways; one on which only the backend
// talks is not, until it too falls silent.
func TestIdleTimeout(t *testing.T) {
	const idle = 200 * time.Millisecond
	t.Run("both directions idle", func(t *testing.T) {
		s := tcpService("svc", echoServer(t))
		s.IdleTimeoutMillis = int(idle / time.Millisecond)
		b, _ := balancer(t, s)
		c, err := net.Dial("tcp", b.Addr("svc").String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if err := echo(c, "ping"); err != nil {
			t.Fatal(err)
		}
		if took := closedWithin(t, c, 5*time.Second); took < idle*3/4 {
			t.Errorf("closed after %s, before the idle timeout of %s", took, idle)
		}
		eventually(t, "the proxy to let the connection go", func() bool { return active(b, "svc") == 0 })
	})
	t.Run("one direction busy", func(t *testing.T) {
		// A longer idle timeout here: the backend's pauses must stay far
		// below it even when this test starves beside a build.
		const idle = 500 * time.Millisecond
		const ticks = 75 // 1.5 s of one byte every 20 ms: three idle timeouts
		s := tcpService("svc", tickServer(t, ticks))
		s.IdleTimeoutMillis = int(idle / time.Millisecond)
		b, _ := balancer(t, s)
		c, err := net.Dial("tcp", b.Addr("svc").String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.ReadFull(c, make([]byte, ticks)); err != nil {
			t.Fatalf("a connection the backend keeps busy was cut: %v", err)
		}
		if took := closedWithin(t, c, 5*time.Second); took < idle*3/4 {
			t.Errorf("closed %s after the last byte, before the idle timeout of %s", took, idle)
		}
	})
}

// refused reports whether a connection to addr is cut at once, without a
// byte of answer.
func refused(t *testing.T, addr string) bool {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return true
	}
	defer c.Close()
	c.Write([]byte("x"))
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	n, err := c.Read(make([]byte, 1))
	return n == 0 && err != nil && !errors.Is(err, os.ErrDeadlineExceeded)
}

// warnings returns the warning messages logged.
func warnings(h *test.Hook) []string {
	var out []string
	for _, e := range h.AllEntries() {
		if e.Level == logrus.WarnLevel {
			out = append(out, e.Message)
		}
	}
	return out
}

// TestConnectionCap: a service at its cap refuses the next connections,
// with one warning for all of them, and accepts again once one of its
// connections closes.
func TestConnectionCap(t *testing.T) {
	const limit = 2
	s := tcpService("svc", echoServer(t))
	s.MaxConns = limit
	b, logs := balancer(t, s)
	addr := b.Addr("svc").String()
	var open []net.Conn
	for i := range limit {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if err := echo(c, "hello"); err != nil {
			t.Fatalf("connection %d of %d: %v", i+1, limit, err)
		}
		open = append(open, c)
	}
	for i := range 5 {
		if !refused(t, addr) {
			t.Fatalf("connection %d past the cap of %d was served", i+1, limit)
		}
	}
	if w := warnings(logs); len(w) != 1 || !strings.Contains(w[0], "refused 1 new connection") {
		t.Errorf("warnings %q, want one for the first refusal", w)
	}
	// Connections that are open keep working.
	if err := echo(open[1], "still"); err != nil {
		t.Errorf("an admitted connection broke: %v", err)
	}

	open[0].Close()
	var again net.Conn
	eventually(t, "a new connection to be served once one closed", func() bool {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return false
		}
		if echo(c, "again") != nil {
			c.Close()
			return false
		}
		again = c
		return true
	})
	defer again.Close()
	if active(b, "svc") != limit {
		t.Errorf("active = %d, want %d", active(b, "svc"), limit)
	}
	if w := warnings(logs); len(w) != 1 {
		t.Errorf("%d warnings within a minute, want 1: %q", len(w), w)
	}
}

// TestRefusalsWarnOncePerInterval: the first refusal warns, those within
// refusalLogInterval are counted into the next warning.
func TestRefusalsWarnOncePerInterval(t *testing.T) {
	var r refusals
	t0 := time.Unix(1700000000, 0)
	steps := []struct {
		after time.Duration
		want  int
	}{
		{0, 1},
		{time.Second, 0},
		{30 * time.Second, 0},
		{refusalLogInterval, 3}, // this one and the two before
		{refusalLogInterval + time.Second, 0},
		{3 * refusalLogInterval, 2},
	}
	for i, s := range steps {
		if got := r.add(t0.Add(s.after)); got != s.want {
			t.Errorf("refusal %d at +%s: report %d, want %d", i, s.after, got, s.want)
		}
	}
}
