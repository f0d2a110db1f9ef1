package lb

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/kiln-project/kiln/platforms/netroute"
	"github.com/kiln-project/kiln/platforms/netroute/netroutetest"
)

// readyzShuttingDown is kube-apiserver's /readyz answer once it received
// SIGTERM: its "shutdown" check fails.
const readyzShuttingDown = "[+]ping ok\n[+]etcd ok\n[-]shutdown failed: reason withheld\nreadyz check failed"

// answering is an HTTPS server answering every request with status and body.
func answering(t *testing.T, status int, body string) *httptest.Server {
	t.Helper()
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, body, status)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// The checkers grade what they saw: no TCP connection, a "not ready"
// answer, a "shutting down" one, or no answer in time.
func TestCheckGrades(t *testing.T) {
	goneAddr := netroutetest.RefusingAddr(t)
	notReadySrv := answering(t, http.StatusInternalServerError, "etcd member removed")
	drainingSrv := answering(t, http.StatusInternalServerError, readyzShuttingDown)
	// The shutdown line past the bytes a check reads is not seen.
	farSrv := answering(t, http.StatusInternalServerError, strings.Repeat("[+]x ok\n", 2*maxCheckBody/8)+readyzShuttingDown)
	// Another check failing, "shutdown" passing: not draining.
	etcdSrv := answering(t, http.StatusInternalServerError, "[+]ping ok\n[-]etcd failed: reason withheld\n[+]shutdown ok\nreadyz check failed")
	release := make(chan struct{})
	slowSrv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
			io.WriteString(w, "ok")
		case <-r.Context().Done():
			// The client gave up: answering now would race its
			// transport, which may still read a 200 that came late.
			panic(http.ErrAbortHandler)
		}
	}))
	t.Cleanup(slowSrv.Close)
	t.Cleanup(func() { close(release) })
	okSrv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	t.Cleanup(okSrv.Close)

	https, err := newChecker(Service{Name: "api", Health: CheckHTTPS, HealthPath: "/readyz"}, netroute.Dialer{})
	if err != nil {
		t.Fatal(err)
	}
	tcp, err := newChecker(Service{Name: "mcs", Health: CheckTCP}, netroute.Dialer{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		check checker
		addr  string
		want  failure
	}{
		{"https to a closed port", https, goneAddr, unreachable},
		{"tcp to a closed port", tcp, goneAddr, unreachable},
		{"https answering 500", https, hostOf(notReadySrv), notReady},
		{"https answering 500, shutting down", https, hostOf(drainingSrv), draining},
		{"https answering 500, shutting down past the bytes read", https, hostOf(farSrv), notReady},
		{"https answering 500, etcd failing", https, hostOf(etcdSrv), notReady},
		{"https not answering in time", https, hostOf(slowSrv), slow},
	} {
		timeout := 300 * time.Millisecond
		if tc.want != slow {
			// An answer, or a refusal, must not be graded by a timeout
			// on a loaded machine (-race).
			timeout = 10 * time.Second
		}
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		err := tc.check(ctx, tc.addr)
		cancel()
		if err == nil {
			t.Errorf("%s: check passed", tc.name)
			continue
		}
		if got := gradeOf(err); got != tc.want {
			t.Errorf("%s: graded %d, want %d (%v)", tc.name, got, tc.want, err)
		}
	}
	if err := https(context.Background(), hostOf(okSrv)); err != nil {
		t.Errorf("https to a ready backend: %v", err)
	}
}

// TestShuttingDown: only a line starting "[-]shutdown " says that
// kube-apiserver's shutdown check failed.
func TestShuttingDown(t *testing.T) {
	for body, want := range map[string]bool{
		readyzShuttingDown:                                  true,
		"[-]shutdown failed: reason withheld":               true,
		"[-]shutdown failed: reason withheld\r\n":           true,
		"[+]shutdown ok\nreadyz check failed":               false,
		"[-]shutdowns failed: reason withheld":              false,
		"etcd member removed; [-]shutdown failed":           false,
		"[+]ping ok\n  [-]shutdown failed: reason withheld": false,
		"": false,
	} {
		if got := shuttingDown([]byte(body)); got != want {
			t.Errorf("shuttingDown(%q) = %v, want %v", body, got, want)
		}
	}
}

// drainingErr is a failed check of an API server that is shutting down.
func drainingErr() error {
	return &checkError{grade: draining, err: errors.New("GET /readyz: 500 Internal Server Error: shutting down")}
}

// gradedChecks returns a quiet Balancer and a failed check of each grade:
// one that timed out, one answered "not ready", one refused.
func gradedChecks() (b *Balancer, slowErr, notReadyErr, goneErr error) {
	log := logrus.New()
	log.SetOutput(io.Discard)
	return New(log), errors.New("context deadline exceeded"),
		&checkError{grade: notReady, err: errors.New("GET /readyz: 500")},
		&checkError{grade: unreachable, err: errors.New("connection refused")}
}

// record marks a backend down and closes its sessions by the grade, the
// count of failed checks in a row (fallChecks, staleChecks) and whether
// another backend is healthy: sessions move only when they have somewhere
// to go, except from a backend that is gone, and never from one that is
// draining, which closes them itself.
func TestRecordFallRules(t *testing.T) {
	b, slowErr, notReadyErr, goneErr := gradedChecks()
	drainErr := drainingErr()
	never := int32(staleChecks + 1)
	for _, tc := range []struct {
		name string
		err  error
		// other: a second backend of the service is healthy.
		other bool
		// downAt and closeAt are the failed checks (1-based) after which the
		// backend is marked down and its sessions are closed.
		downAt, closeAt int32
	}{
		{"slow", slowErr, true, fallChecks, staleChecks},
		{"not ready", notReadyErr, true, fallChecks, staleChecks},
		{"unreachable", goneErr, true, 1, 1},
		{"draining", drainErr, true, 1, never},
		{"draining, no other backend", drainErr, false, 1, never},
		{"slow, no other backend", slowErr, false, fallChecks, never},
		{"not ready, no other backend", notReadyErr, false, fallChecks, never},
		{"unreachable, no other backend", goneErr, false, 1, 1},
	} {
		be, other := &backend{addr: "10.0.0.1:6443"}, &backend{addr: "10.0.0.2:6443"}
		svc := &service{name: "api"}
		svc.backends.Store(&[]*backend{be, other})
		b.record(svc, be, nil)
		if tc.other {
			b.record(svc, other, nil)
		}
		client, server := net.Pipe()
		be.sessions.add(client)
		for i := int32(1); i <= staleChecks; i++ {
			b.record(svc, be, tc.err)
			if down := !be.healthy.Load(); down != (i >= tc.downAt) {
				t.Errorf("%s: after %d failed checks down=%v, want down from check %d", tc.name, i, down, tc.downAt)
			}
			closed := len(be.sessions.conns) == 0
			if closed != (i >= tc.closeAt) {
				t.Errorf("%s: after %d failed checks sessions closed=%v, want closed from check %d", tc.name, i, closed, tc.closeAt)
			}
		}
		b.record(svc, be, nil)
		if !be.healthy.Load() || be.fails.Load() != 0 {
			t.Errorf("%s: a passed check left healthy=%v fails=%d", tc.name, be.healthy.Load(), be.fails.Load())
		}
		client.Close()
		server.Close()
	}
}

// A down backend that kept its sessions while no other was healthy loses
// them at its first failed check after another backend passes.
func TestSessionsMoveOnceAnotherBackendIsHealthy(t *testing.T) {
	b, _, notReadyErr, _ := gradedChecks()
	be, other := &backend{addr: "a"}, &backend{addr: "b"}
	svc := &service{name: "api"}
	svc.backends.Store(&[]*backend{be, other})
	client, server := net.Pipe()
	t.Cleanup(func() { client.Close(); server.Close() })
	be.sessions.add(client)
	for range staleChecks + 2 {
		b.record(svc, be, notReadyErr)
	}
	if len(be.sessions.conns) != 1 {
		t.Fatalf("sessions closed with no other backend healthy")
	}
	b.record(svc, other, nil)
	b.record(svc, be, notReadyErr)
	if len(be.sessions.conns) != 0 {
		t.Errorf("sessions kept after another backend became healthy")
	}
}

// TestUsableFallsBackToReachableBackends: new connections go to the healthy
// backends; with none, to those whose last check reached them (it timed
// out or answered "not ready"), never to one that refused connections.
func TestUsableFallsBackToReachableBackends(t *testing.T) {
	b, slowErr, notReadyErr, goneErr := gradedChecks()
	fail := func(svc *service, be *backend, errs ...error) {
		for _, err := range errs {
			b.record(svc, be, err)
		}
	}
	times := func(n int, err error) []error {
		out := make([]error, n)
		for i := range out {
			out[i] = err
		}
		return out
	}
	for _, tc := range []struct {
		name string
		// failures of backends a and b, in order; nil passes a check
		a, b []error
		want []string
	}{
		{"both healthy", []error{nil}, []error{nil}, []string{"a", "b"}},
		{"one slow, one healthy", times(fallChecks, slowErr), []error{nil}, []string{"b"}},
		{"one not ready, one healthy", times(fallChecks, notReadyErr), []error{nil}, []string{"b"}},
		{"one draining, one healthy", times(1, drainingErr()), []error{nil}, []string{"b"}},
		// It still serves until it stops listening.
		{"one draining, one gone", times(1, drainingErr()), times(1, goneErr), []string{"a"}},
		{"draining, then gone; one slow", append(times(1, drainingErr()), goneErr), times(fallChecks, slowErr), []string{"b"}},
		{"one slow, one not ready", times(fallChecks, slowErr), times(fallChecks, notReadyErr), []string{"a", "b"}},
		{"both slow", times(staleChecks, slowErr), times(fallChecks, slowErr), []string{"a", "b"}},
		{"slow, then not ready; one gone", append(times(2, slowErr), notReadyErr), times(1, goneErr), []string{"a"}},
		{"not ready, then gone", append([]error{notReadyErr}, times(fallChecks, goneErr)...), times(fallChecks, slowErr), []string{"b"}},
		{"gone, then slow", append(times(fallChecks, goneErr), slowErr), times(1, goneErr), []string{"a"}},
		{"both gone", times(1, goneErr), times(fallChecks, goneErr), nil},
	} {
		a, bb := &backend{addr: "a"}, &backend{addr: "b"}
		svc := &service{name: "api"}
		svc.backends.Store(&[]*backend{a, bb})
		b.record(svc, a, nil)
		b.record(svc, bb, nil)
		fail(svc, a, tc.a...)
		fail(svc, bb, tc.b...)
		var got []string
		for _, be := range svc.usable() {
			got = append(got, be.addr)
		}
		if strings.Join(got, ",") != strings.Join(tc.want, ",") {
			t.Errorf("%s: usable backends %v, want %v", tc.name, got, tc.want)
		}
	}
}

// The local platform's balancer, on the VIP, dials its backends only
// beside it; the ssh hosts' API proxy, on loopback, dials the masters
// through the host's routes (with Beside it would reach none of them).
func TestBackendDialerPolicy(t *testing.T) {
	for listen, beside := range map[string]bool{"10.66.0.1": true, "127.0.0.1": false, "0.0.0.0": false, "::1": false} {
		_, ok := backendDialer(listen).Policy.(netroute.Beside)
		if ok != beside {
			t.Errorf("listen %s: policy %#v, want beside it: %v", listen, backendDialer(listen).Policy, beside)
		}
	}
	// On loopback, a backend that is not on loopback is allowed.
	if err := backendDialer("127.0.0.1").Policy.Check(netip.MustParseAddr("10.200.12.12")); err != nil {
		t.Errorf("API proxy on loopback to a master: %v", err)
	}
}
