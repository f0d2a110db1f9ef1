package lb

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"
)

// backendOf returns the backend addr of service name, nil when there is none.
func backendOf(b *Balancer, name, addr string) *backend {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, svc := range b.services {
		if svc.name != name {
			continue
		}
		for _, be := range *svc.backends.Load() {
			if be.addr == addr {
				return be
			}
		}
	}
	return nil
}

// fakeAPIServer is an HTTP/2 server that answers /readyz as kube-apiserver
// does (failing its "shutdown" check once draining is set) and name to
// other paths, after release is closed for /slow.
func fakeAPIServer(t *testing.T, name string, draining *atomic.Bool, started chan<- struct{}, release <-chan struct{}) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/readyz":
			if draining != nil && draining.Load() {
				http.Error(w, readyzShuttingDown, http.StatusInternalServerError)
				return
			}
			io.WriteString(w, "ok")
		case "/slow":
			started <- struct{}{}
			<-release
			io.WriteString(w, name)
		default:
			io.WriteString(w, name)
		}
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

// apiClient is an HTTP/2 client whose connections all go to addr (the
// balancer), as client-go's to the API VIP.
func apiClient(addr string) *http.Client {
	var d net.Dialer
	return &http.Client{Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // test servers
		ForceAttemptHTTP2: true,
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return d.DialContext(ctx, network, addr)
		},
	}}
}

// get returns the body of GET path through c.
func get(c *http.Client, path string) (string, error) {
	resp, err := c.Get("https://api" + path)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return string(body), err
}

// TestDrainingBackendKeepsRequestsInFlight is a rolling restart of one API
// server behind the balancer: once it says it is shutting down, it gets no
// new connections, but a request in flight on its session — past the
// fallChecks that mark a "not ready" backend down — completes, and after the server's graceful shutdown (GOAWAY) the same
// client goes on with the other backend without an error.
func TestDrainingBackendKeepsRequestsInFlight(t *testing.T) {
	var draining atomic.Bool
	started, release := make(chan struct{}, 1), make(chan struct{})
	leaving := fakeAPIServer(t, "leaving", &draining, started, release)
	api := apiService(hostOf(leaving))
	b := startBalancer(t, &Config{Listen: "127.0.0.1", Services: []Service{api}})
	eventually(t, "backend healthy", func() bool { return healthyCount(b, "api") == 1 })

	client := apiClient(b.Addr("api").String())
	type result struct {
		body string
		err  error
	}
	slow := make(chan result, 1)
	go func() {
		body, err := get(client, "/slow")
		slow <- result{body, err}
	}()
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the request did not reach the backend")
	}

	staying := fakeAPIServer(t, "staying", nil, nil, nil)
	api.Backends = append(api.Backends, hostOf(staying))
	if err := b.Apply(&Config{Listen: "127.0.0.1", Services: []Service{api}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "2 healthy backends", func() bool { return healthyCount(b, "api") == 2 })

	draining.Store(true)
	be := backendOf(b, "api", hostOf(leaving))
	eventually(t, "the draining backend marked down", func() bool { return !be.healthy.Load() })
	if n := be.fails.Load(); n >= fallChecks {
		t.Errorf("marked down after %d failed checks, want at the first", n)
	}
	// Checks go on: a "not ready" or slow backend's sessions would be
	// closed now.
	eventually(t, "more failed checks", func() bool { return be.fails.Load() > staleChecks })
	if n := be.sessions.count(); n != 1 {
		t.Errorf("the draining backend has %d sessions, want its 1", n)
	}
	for range 4 {
		c := apiClient(b.Addr("api").String())
		if got := readBody(t, c, "/"); got != "staying" {
			t.Errorf("a new connection went to %q, want the backend staying", got)
		}
		c.CloseIdleConnections()
	}

	close(release)
	r := <-slow
	if r.err != nil || r.body != "leaving" {
		t.Fatalf("request in flight on the draining backend: %q, %v", r.body, r.err)
	}
	// Its graceful shutdown: GOAWAY, then its connections close.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := leaving.Config.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if got := readBody(t, client, "/"); got != "staying" {
		t.Errorf("after the draining backend's shutdown the client got %q, want the backend staying", got)
	}
}

// readBody is get, failing t on an error.
func readBody(t *testing.T, c *http.Client, path string) string {
	t.Helper()
	body, err := get(c, path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return body
}

// A draining backend is said to be so, once, with what happens to its
// sessions; when it then refuses connections what is left is closed.
func TestDrainingLoggedThenGone(t *testing.T) {
	log, hook := test.NewNullLogger()
	log.SetLevel(logrus.InfoLevel)
	b := New(log)
	_, _, _, goneErr := gradedChecks()
	be, other := &backend{addr: "10.0.0.1:6443"}, &backend{addr: "10.0.0.2:6443"}
	svc := &service{name: "api"}
	svc.backends.Store(&[]*backend{be, other})
	b.record(svc, be, nil)
	b.record(svc, other, nil)
	client, server := net.Pipe()
	t.Cleanup(func() { client.Close(); server.Close() })
	be.sessions.add(client)
	hook.Reset()
	for range fallChecks {
		b.record(svc, be, drainingErr())
	}
	const want = "api: backend 10.0.0.1:6443 is draining (shutting down): no new connections, its 1 sessions end when it closes them"
	var said []string
	for _, e := range hook.AllEntries() {
		said = append(said, e.Message)
	}
	if len(said) != 1 || said[0] != want {
		t.Errorf("logged %q, want once %q", said, want)
	}
	if be.sessions.count() != 1 {
		t.Fatalf("sessions of the draining backend closed")
	}
	b.record(svc, be, goneErr)
	if n := be.sessions.count(); n != 0 {
		t.Errorf("%d sessions kept after the draining backend refused connections", n)
	}
	if last := hook.LastEntry(); last == nil || !strings.Contains(last.Message, "1 sessions closed") {
		t.Errorf("last log %v, want its session closed", last)
	}
}
