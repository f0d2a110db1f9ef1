package lb

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"

	"github.com/kiln-project/kiln/graph/atomicfile"
)

// TestMain lets the test binary act as `kiln lb` for the detached-process
// test: with KILN_LB_TEST_SERVE=1 it serves the config named in its argv.
func TestMain(m *testing.M) {
	if os.Getenv("KILN_LB_TEST_SERVE") == "1" {
		args := os.Args[1:]
		var cfg, pid string
		for i := 0; i+1 < len(args); i++ {
			switch args[i] {
			case "--config":
				cfg = args[i+1]
			case "--pid-file":
				pid = args[i+1]
			}
		}
		log := logrus.New()
		if err := Serve(context.Background(), ServeOptions{ConfigPath: cfg, PIDFile: pid, Log: log}); err != nil {
			log.Fatal(err)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// nameServer is a TCP backend that writes its name to every connection and
// closes it.
func nameServer(t testing.TB, name string) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte(name))
			c.Close()
		}
	}()
	return ln
}

// readName dials addr and returns what the backend wrote ("" when the
// balancer closed the connection without a backend).
func readName(t testing.TB, addr string) string {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(3 * time.Second))
	data, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("read through balancer: %v", err)
	}
	return string(data)
}

// eventually polls cond until it holds or 10 s pass.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func startBalancer(t testing.TB, cfg *Config) *Balancer {
	t.Helper()
	log, _ := test.NewNullLogger()
	b := New(log)
	if err := b.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		b.Shutdown(ctx)
	})
	return b
}

// healthyCount returns how many backends of service name passed a check.
func healthyCount(b *Balancer, name string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, svc := range b.services {
		if svc.name == name {
			n := 0
			for _, be := range *svc.backends.Load() {
				if be.healthy.Load() {
					n++
				}
			}
			return n
		}
	}
	return -1
}

// apiService is the API's service: an HTTPS /readyz check of backends
// (host:port addresses) every 50 ms.
func apiService(backends ...string) Service {
	return Service{Name: "api", Health: CheckHTTPS, HealthPath: "/readyz", IntervalMillis: 50, Backends: backends}
}

// hostOf is the host:port of an httptest server.
func hostOf(srv *httptest.Server) string { return strings.TrimPrefix(srv.URL, "https://") }

func tcpService(name string, backends ...net.Listener) Service {
	s := Service{Name: name, Health: CheckTCP, IntervalMillis: 50}
	for _, b := range backends {
		s.Backends = append(s.Backends, b.Addr().String())
	}
	return s
}

func TestRoundRobin(t *testing.T) {
	a, b2, c := nameServer(t, "a"), nameServer(t, "b"), nameServer(t, "c")
	b := startBalancer(t, &Config{Listen: "127.0.0.1", Services: []Service{tcpService("mcs", a, b2, c)}})
	eventually(t, "3 healthy backends", func() bool { return healthyCount(b, "mcs") == 3 })
	addr := b.Addr("mcs").String()
	var got []string
	for range 6 {
		got = append(got, readName(t, addr))
	}
	// Each backend gets every third connection.
	for i := range got {
		if got[i] == "" || got[i] != got[(i+3)%6] || got[i] == got[(i+1)%6] {
			t.Fatalf("connections went to %v, want a round-robin rotation", got)
		}
	}
}

func TestUnhealthySkipped(t *testing.T) {
	var failing atomic.Bool
	failing.Store(true)
	https := func(name string, fail *atomic.Bool) *httptest.Server {
		srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/readyz" && fail != nil && fail.Load() {
				http.Error(w, "etcd not ready", http.StatusInternalServerError)
				return
			}
			io.WriteString(w, name)
		}))
		t.Cleanup(srv.Close)
		return srv
	}
	good, bad := https("good", nil), https("bad", &failing)
	down := nameServer(t, "down")
	down.Close()
	api := apiService(hostOf(good), hostOf(bad), down.Addr().String())
	b := startBalancer(t, &Config{Listen: "127.0.0.1", Services: []Service{api}})
	eventually(t, "1 healthy backend", func() bool { return healthyCount(b, "api") == 1 })
	client := good.Client()
	// One proxied connection per request, so each is balanced.
	client.Transport.(*http.Transport).DisableKeepAlives = true
	get := func() string {
		resp, err := client.Get("https://" + b.Addr("api").String() + "/")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return string(body)
	}
	for i := range 4 {
		if got := get(); got != "good" {
			t.Fatalf("request %d answered by %q, want only the healthy backend", i, got)
		}
	}
	failing.Store(false)
	eventually(t, "2 healthy backends", func() bool { return healthyCount(b, "api") == 2 })
	seen := map[string]bool{}
	for range 4 {
		seen[get()] = true
	}
	if !seen["good"] || !seen["bad"] {
		t.Errorf("after recovery, requests reached %v, want both backends", seen)
	}
}

// TestReachableOnlyBackendStillServes: an API server whose /readyz answers
// later than the check's timeout, or answers "not ready" (its etcd check
// failed), is marked down, but while no backend is healthy it still gets
// new connections - a loaded control plane serves slowly instead of every
// client getting EOF - and the health status says so.
func TestReachableOnlyBackendStillServes(t *testing.T) {
	for _, tc := range []struct {
		name   string
		readyz func(w http.ResponseWriter)
		err    string
	}{
		{"slow", func(http.ResponseWriter) { time.Sleep(minCheckTimeout + 500*time.Millisecond) }, "context deadline exceeded"},
		{"not ready", func(w http.ResponseWriter) { w.WriteHeader(http.StatusInternalServerError) }, "GET /readyz: 500 Internal Server Error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/readyz" {
					tc.readyz(w)
					return
				}
				io.WriteString(w, "served")
			}))
			t.Cleanup(srv.Close)
			api := apiService(hostOf(srv))
			b := startBalancer(t, &Config{Listen: "127.0.0.1", Services: []Service{api}})
			eventually(t, "the backend marked down, still reachable", func() bool {
				st := b.Status()
				be := st.Services[0].Backends[0]
				return len(st.Services) == 1 && !be.Healthy && be.Reachable && be.Fails >= fallChecks
			})
			want := "no backend passes its health check: " + api.Backends[0] + ": " + tc.err + " (still used: it accepts connections)"
			if p := b.Status().Problem("api"); p != want {
				t.Errorf("Problem = %q, want %q", p, want)
			}
			client := srv.Client()
			client.Transport.(*http.Transport).DisableKeepAlives = true
			resp, err := client.Get("https://" + b.Addr("api").String() + "/")
			if err != nil {
				t.Fatalf("through the balancer: %v", err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if string(body) != "served" {
				t.Errorf("answered %q", body)
			}
		})
	}
}

func TestNoHealthyBackendClosesConnection(t *testing.T) {
	down := nameServer(t, "down")
	down.Close()
	b := startBalancer(t, &Config{Listen: "127.0.0.1", Services: []Service{tcpService("mcs", down)}})
	time.Sleep(100 * time.Millisecond)
	if got := readName(t, b.Addr("mcs").String()); got != "" {
		t.Errorf("got %q, want the connection closed", got)
	}
}

func TestReloadRemovesBackend(t *testing.T) {
	boot, master := nameServer(t, "bootstrap"), nameServer(t, "master")
	cfg := &Config{Listen: "127.0.0.1", Services: []Service{tcpService("mcs", boot, master)}}
	b := startBalancer(t, cfg)
	eventually(t, "2 healthy backends", func() bool { return healthyCount(b, "mcs") == 2 })
	addr := b.Addr("mcs").String()
	seen := map[string]bool{readName(t, addr): true, readName(t, addr): true}
	if !seen["bootstrap"] || !seen["master"] {
		t.Fatalf("before reload, connections reached %v", seen)
	}
	if err := b.Apply(&Config{Listen: "127.0.0.1", Services: []Service{tcpService("mcs", master)}}); err != nil {
		t.Fatal(err)
	}
	if b.Addr("mcs").String() != addr {
		t.Fatalf("reload moved the listener from %s to %s", addr, b.Addr("mcs"))
	}
	// The kept backend stays healthy across the reload: no gap.
	for i := range 4 {
		if got := readName(t, addr); got != "master" {
			t.Fatalf("after reload, connection %d reached %q", i, got)
		}
	}
	// Removing a service closes its listener.
	if err := b.Apply(&Config{Listen: "127.0.0.1"}); err != nil {
		t.Fatal(err)
	}
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Errorf("listener of a removed service still accepts")
	}
}

// Reloads that follow each other faster than health checks start must not
// race: each check loop uses the configuration it was started with, never
// the one a later Apply stores (the race detector flagged that).
func TestRapidReloads(t *testing.T) {
	boot, master := nameServer(t, "bootstrap"), nameServer(t, "master")
	both := &Config{Listen: "127.0.0.1", Services: []Service{tcpService("mcs", boot, master)}}
	b := startBalancer(t, both)
	for range 5 {
		for _, cfg := range []*Config{{Listen: "127.0.0.1", Services: []Service{tcpService("mcs", master)}}, both} {
			if err := b.Apply(cfg); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := b.Apply(&Config{Listen: "127.0.0.1", Services: []Service{tcpService("mcs", master)}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "1 healthy backend", func() bool { return healthyCount(b, "mcs") == 1 })
	addr := b.Addr("mcs").String()
	for i := range 3 {
		if got := readName(t, addr); got != "master" {
			t.Fatalf("after the last reload, connection %d reached %q", i, got)
		}
	}
}

// echoServer echoes everything it reads.
func echoServer(t testing.TB) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				io.Copy(c, c)
				c.Close()
			}()
		}
	}()
	return ln
}

func TestGracefulStop(t *testing.T) {
	echo := echoServer(t)
	log, _ := test.NewNullLogger()
	b := New(log)
	if err := b.Apply(&Config{Listen: "127.0.0.1", Services: []Service{tcpService("api", echo)}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "healthy backend", func() bool { return healthyCount(b, "api") == 1 })
	addr := b.Addr("api").String()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		done <- b.Shutdown(ctx)
	}()
	eventually(t, "listener closed", func() bool {
		nc, err := net.DialTimeout("tcp", addr, 100*time.Millisecond)
		if err == nil {
			nc.Close()
		}
		return err != nil
	})
	// The open connection still works during the grace period.
	c.Write([]byte("ping"))
	buf := make([]byte, 4)
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("open connection during shutdown: %q, %v", buf, err)
	}
	select {
	case err := <-done:
		t.Fatalf("Shutdown returned %v with a connection open", err)
	case <-time.After(100 * time.Millisecond):
	}
	c.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Shutdown = %v", err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("Shutdown did not return after the last connection closed")
	}
}

func TestShutdownDeadlineClosesConnections(t *testing.T) {
	echo := echoServer(t)
	log, _ := test.NewNullLogger()
	b := New(log)
	b.Apply(&Config{Listen: "127.0.0.1", Services: []Service{tcpService("api", echo)}})
	eventually(t, "healthy backend", func() bool { return healthyCount(b, "api") == 1 })
	c, err := net.Dial("tcp", b.Addr("api").String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte("x"))
	io.ReadFull(c, make([]byte, 1))
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := b.Shutdown(ctx); err == nil {
		t.Errorf("Shutdown = nil, want the deadline error")
	}
	c.SetReadDeadline(time.Now().Add(time.Second))
	if n, err := c.Read(make([]byte, 1)); err == nil {
		t.Errorf("connection still open after forced shutdown (read %d)", n)
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want []string // substrings of the error, none when valid
	}{
		{"valid", Config{Listen: "10.88.0.1", Services: []Service{
			{Name: "api", Port: 6443, Health: CheckHTTPS, HealthPath: "/readyz", Backends: []string{"10.88.0.10", "10.88.0.11:6443"}},
			{Name: "mcs", Port: 22623, Health: CheckTCP, Backends: []string{"10.88.0.10"}},
		}}, nil},
		{"every problem", Config{Listen: "gateway", Services: []Service{
			{Name: "api", Port: 6443, Health: CheckHTTPS, Backends: []string{"master-0"}},
			{Name: "mcs", Port: 6443, Health: "icmp", IdleTimeoutMillis: -1, MaxConns: -1},
		}}, []string{"listen:", "services[0].healthPath", "services[0].backends[0]", "services[1].port: 6443 used twice", "services[1].health",
			"services[1].idleTimeoutMillis", "services[1].maxConns"}},
	}
	for _, tt := range tests {
		err := tt.cfg.Validate()
		if (err == nil) != (len(tt.want) == 0) {
			t.Fatalf("%s: Validate = %v", tt.name, err)
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q lacks %q", tt.name, err, w)
			}
		}
	}
	s := Service{Port: 22623, Backends: []string{"10.0.0.1", "10.0.0.2:1234", "fd00::1"}}
	if got := strings.Join(s.backendAddrs(), ","); got != "10.0.0.1:22623,10.0.0.2:1234,[fd00::1]:22623" {
		t.Errorf("backendAddrs = %s", got)
	}
}

func writeConfig(t *testing.T, path string, cfg *Config) {
	t.Helper()
	data, _ := json.Marshal(cfg)
	if err := atomicfile.Write(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// freePort returns a port free on 127.0.0.1 at the time of the call.
func freePort(t *testing.T) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// TestProcess runs the balancer as a detached process (the test binary in
// the role of kiln), reloads it with SIGHUP and stops it.
func TestProcess(t *testing.T) {
	dir := t.TempDir()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	boot, master := nameServer(t, "bootstrap"), nameServer(t, "master")
	port := freePort(t)
	svc := tcpService("mcs", boot, master)
	svc.Port = port
	p := Process{Kiln: self, ConfigPath: filepath.Join(dir, "lb.json"), PIDFile: filepath.Join(dir, "lb.pid"), LogFile: filepath.Join(dir, "lb.log"),
		Env: []string{"KILN_LB_TEST_SERVE=1"}}
	writeConfig(t, p.ConfigPath, &Config{Listen: "127.0.0.1", Services: []Service{svc}})
	ctx := context.Background()
	pid, err := p.Start(ctx)
	if err != nil {
		log, _ := os.ReadFile(p.LogFile)
		t.Fatalf("Start: %v\n%s", err, log)
	}
	t.Cleanup(func() { p.Stop(ctx, time.Second) })
	if got, err := p.PID(); err != nil || got != pid {
		t.Fatalf("PID = %d, %v; want %d", got, err, pid)
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	eventually(t, "both backends used", func() bool {
		seen := map[string]bool{readName(t, addr): true, readName(t, addr): true}
		return seen["bootstrap"] && seen["master"]
	})
	svc = tcpService("mcs", master)
	svc.Port = port
	writeConfig(t, p.ConfigPath, &Config{Listen: "127.0.0.1", Services: []Service{svc}})
	if err := p.Reload(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "bootstrap removed", func() bool {
		for range 3 {
			if readName(t, addr) != "master" {
				return false
			}
		}
		return true
	})
	if err := p.Stop(ctx, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	if alive(pid) {
		t.Errorf("process %d still alive after Stop", pid)
	}
	if _, err := p.PID(); err != ErrNotRunning {
		t.Errorf("PID after Stop = %v, want ErrNotRunning", err)
	}
	if err := p.Stop(ctx, time.Second); err != nil {
		t.Errorf("second Stop = %v, want nil", err)
	}
}

func TestPIDRefusesForeignProcess(t *testing.T) {
	dir := t.TempDir()
	p := Process{ConfigPath: filepath.Join(dir, "lb.json"), PIDFile: filepath.Join(dir, "lb.pid")}
	// Our own pid is alive but not a `kiln lb` with this config.
	os.WriteFile(p.PIDFile, []byte(fmt.Sprintf("%d\n", os.Getpid())), 0o644)
	if _, err := p.PID(); err != ErrNotRunning {
		t.Errorf("PID = %v, want ErrNotRunning for a foreign process", err)
	}
	want := []string{"/usr/bin/kiln", "--dir", dir, "lb", "--config", p.ConfigPath, "--pid-file", p.PIDFile}
	p.Kiln = "/usr/bin/kiln"
	if got := p.Command(); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("Command = %q, want %q", got, want)
	}
}

// TestServeReloadsChangedFile runs Serve in-process and edits its
// configuration file: the balancer picks the change up without a signal.
func TestServeReloadsChangedFile(t *testing.T) {
	dir := t.TempDir()
	boot, master := nameServer(t, "bootstrap"), nameServer(t, "master")
	port := freePort(t)
	svc := tcpService("mcs", boot, master)
	svc.Port = port
	cfgPath, pidPath := filepath.Join(dir, "lb.json"), filepath.Join(dir, "lb.pid")
	writeConfig(t, cfgPath, &Config{Listen: "127.0.0.1", Services: []Service{svc}})
	log := logrus.New()
	log.SetOutput(testWriterLB{t})

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- Serve(ctx, ServeOptions{ConfigPath: cfgPath, PIDFile: pidPath, Log: log}) }()
	eventually(t, "pid file", func() bool { _, err := os.Stat(pidPath); return err == nil })
	statusPath := filepath.Join(dir, "lb-health.json")
	eventually(t, "a health status with both backends healthy", func() bool {
		st, err := ReadStatus(statusPath)
		return err == nil && len(st.Services) == 1 && len(st.Services[0].Backends) == 2 &&
			st.Services[0].Backends[0].Healthy && st.Services[0].Backends[1].Healthy && st.Problem("mcs") == ""
	})
	addr := "127.0.0.1:" + strconv.Itoa(port)
	eventually(t, "both backends used", func() bool {
		seen := map[string]bool{readName(t, addr): true, readName(t, addr): true}
		return seen["bootstrap"] && seen["master"]
	})
	svc = tcpService("mcs", master)
	svc.Port = port
	writeConfig(t, cfgPath, &Config{Listen: "127.0.0.1", Services: []Service{svc}})
	eventually(t, "bootstrap removed after the file changed", func() bool {
		for range 3 {
			if readName(t, addr) != "master" {
				return false
			}
		}
		return true
	})
	// A broken file keeps the running configuration.
	os.WriteFile(cfgPath, []byte("{not json"), 0o644)
	time.Sleep(configPoll + 500*time.Millisecond)
	if got := readName(t, addr); got != "master" {
		t.Errorf("after a broken reload, connection reached %q", got)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Serve = %v", err)
	}
	if _, err := os.Stat(pidPath); err == nil {
		t.Errorf("pid file left after Serve returned")
	}
	if _, err := os.Stat(statusPath); err == nil {
		t.Errorf("health status left after Serve returned")
	}
}

type testWriterLB struct{ t *testing.T }

func (w testWriterLB) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// TestMarkedDownClosesSessions: a long-lived connection to a backend that
// starts failing its health check is closed, so the client reconnects to a
// healthy backend instead of waiting forever on a dead API server.
func TestMarkedDownClosesSessions(t *testing.T) {
	var failing atomic.Bool
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/readyz" && failing.Load() {
			http.Error(w, "etcd member removed", http.StatusInternalServerError)
			return
		}
		io.WriteString(w, "ok")
	}))
	t.Cleanup(srv.Close)
	api := apiService(hostOf(srv))
	b := startBalancer(t, &Config{Listen: "127.0.0.1", Services: []Service{api}})
	eventually(t, "backend healthy", func() bool { return healthyCount(b, "api") == 1 })
	conn, err := net.Dial("tcp", b.Addr("api").String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	time.Sleep(50 * time.Millisecond) // the proxy has dialled the backend
	// Sessions move only when another backend is healthy (a master's API
	// server, when the bootstrap's etcd member was removed).
	good := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	t.Cleanup(good.Close)
	api.Backends = append(api.Backends, hostOf(good))
	if err := b.Apply(&Config{Listen: "127.0.0.1", Services: []Service{api}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "2 healthy backends", func() bool { return healthyCount(b, "api") == 2 })
	failing.Store(true)
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := conn.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("session to a backend marked down was not closed: %v", err)
	}
}

func TestRemovedBackendSessionsClosed(t *testing.T) {
	boot := echoServer(t)
	cfg := &Config{Listen: "127.0.0.1", Services: []Service{tcpService("mcs", boot)}}
	b := startBalancer(t, cfg)
	eventually(t, "healthy", func() bool { return healthyCount(b, "mcs") == 1 })
	conn, err := net.Dial("tcp", b.Addr("mcs").String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := conn.Read(make([]byte, 1)); err != nil {
		t.Fatalf("echo through the proxy: %v", err)
	}
	other := echoServer(t)
	if err := b.Apply(&Config{Listen: "127.0.0.1", Services: []Service{tcpService("mcs", other)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("session to a removed backend was not closed: %v", err)
	}
}
