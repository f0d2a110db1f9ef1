package e2e

import (
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/kiln-project/kiln/ignition"
	"github.com/kiln-project/kiln/ignition/mcsauth"
	"github.com/kiln-project/kiln/ignition/nodelayout"
)

// configProbe asks the machine-config server for every role's config through
// the API VIP, as an attacker on the host would: anonymously, every half
// second, for as long as a create runs. Any answer that is a config is a
// finding.
type configProbe struct {
	dir   string
	once  sync.Once
	stop  chan struct{}
	done  chan struct{}
	mu    sync.Mutex
	codes map[string]int // "<role> <status>" -> count
	leaks []string
}

// startConfigProbe starts probing the cluster of dir; the VIP is read from
// the admin kubeconfig as soon as create has written it. The probe stops at
// finish, or when t ends.
func startConfigProbe(t *testing.T, dir string) *configProbe {
	p := &configProbe{dir: dir, stop: make(chan struct{}), done: make(chan struct{}), codes: map[string]int{}}
	go p.run()
	t.Cleanup(p.halt)
	return p
}

func (p *configProbe) halt() {
	p.once.Do(func() { close(p.stop) })
	<-p.done
}

func (p *configProbe) run() {
	defer close(p.done)
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-tick.C:
		}
		host, err := apiHost(p.dir)
		if err != nil {
			continue // not written yet
		}
		if !hostHolds(host) {
			// Not yet an address of this host's bridge: a request now would
			// leave the machine by its default route.
			p.mu.Lock()
			p.codes["VIP not on the host yet"]++
			p.mu.Unlock()
			continue
		}
		for _, role := range []string{"master", "worker"} {
			code, body, err := getConfig(host, role, "")
			p.mu.Lock()
			switch {
			case err != nil:
				p.codes[role+" no answer"]++
			default:
				p.codes[fmt.Sprintf("%s %d", role, code)]++
				if code == http.StatusOK || strings.Contains(body, `"ignition"`) {
					p.leaks = append(p.leaks, fmt.Sprintf("%s: anonymous GET /config/%s = %d (%d bytes)", time.Now().Format(time.TimeOnly), role, code, len(body)))
				}
			}
			p.mu.Unlock()
		}
	}
}

// finish stops the probe and fails t for every config it got. It also
// requires refusals from the server itself, so that a server nobody could
// reach does not pass for a locked one.
func (p *configProbe) finish(t *testing.T) {
	t.Helper()
	p.halt()
	p.mu.Lock()
	defer p.mu.Unlock()
	var seen []string
	for k, n := range p.codes {
		seen = append(seen, fmt.Sprintf("%s: %d", k, n))
	}
	sort.Strings(seen)
	t.Logf("anonymous machine-config requests during create: %s", strings.Join(seen, ", "))
	for _, l := range p.leaks {
		t.Errorf("the machine-config server gave a config away: %s", l)
	}
	for _, role := range []string{"master", "worker"} {
		if p.codes[role+" 401"] == 0 {
			t.Errorf("no anonymous request for the %s config was refused with 401 during create: the probe proves nothing", role)
		}
	}
}

// assertConfigServerLocked checks the machine-config server of an installed
// cluster through the API VIP: no config without a token, none for a role
// the token does not open, and the worker config that the worker token
// still opens carries a join token the API no longer accepts.
func assertConfigServerLocked(t *testing.T, dir string) {
	t.Helper()
	host, err := apiHost(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !hostHolds(host) {
		t.Fatalf("the API VIP %s is not an address of this host", host)
	}
	master, worker := pointerToken(t, dir, "master"), pointerToken(t, dir, "worker")
	for _, tc := range []struct {
		what, role, token string
		want              int
	}{
		{"anonymous", "worker", "", http.StatusUnauthorized},
		{"a guessed token", "worker", "0123456789", http.StatusUnauthorized},
		// The masters' token files hold only the worker token.
		{"the master token, after bootstrap", "worker", master, http.StatusUnauthorized},
		// After bootstrap only masters serve, and they hold no master
		// config: 503 whatever the token (Ignition retries it).
		{"anonymous", "master", "", http.StatusServiceUnavailable},
		{"the worker token", "master", worker, http.StatusServiceUnavailable},
		{"the master token, after bootstrap", "master", master, http.StatusServiceUnavailable},
	} {
		code, body, err := getConfig(host, tc.role, tc.token)
		if err != nil || code != tc.want || strings.Contains(body, `"ignition"`) {
			t.Errorf("GET /config/%s with %s = %d (%d bytes), %v; want %d and no config", tc.role, tc.what, code, len(body), err, tc.want)
		}
	}
	code, body, err := getConfig(host, "worker", worker)
	if err != nil || code != http.StatusOK {
		t.Fatalf("GET /config/worker with the worker token = %d, %v; want the config", code, err)
	}
	cfg, err := ignition.Parse([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	raw, ok, err := ignition.FileContents(cfg, nodelayout.BootstrapKubeconfig)
	if err != nil || !ok {
		t.Fatalf("the served worker config has no %s: %v", nodelayout.BootstrapKubeconfig, err)
	}
	kc, err := clientcmd.Load(raw)
	if err != nil {
		t.Fatal(err)
	}
	for name, a := range kc.AuthInfos {
		req, _ := http.NewRequest(http.MethodGet, "https://"+net.JoinHostPort(host, "6443")+"/api", nil)
		req.Header.Set("Authorization", "Bearer "+a.Token)
		resp, err := insecureClient().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("the install-time join token (%s) in the served worker config still authenticates after install-complete: GET /api = %d", name, resp.StatusCode)
		}
	}
}

// apiHost is the host of the admin kubeconfig's server: the API VIP.
func apiHost(dir string) (string, error) {
	kc, err := clientcmd.LoadFromFile(filepath.Join(dir, "auth", "kubeconfig"))
	if err != nil {
		return "", err
	}
	for _, c := range kc.Clusters {
		u, err := url.Parse(c.Server)
		if err != nil {
			return "", err
		}
		return u.Hostname(), nil
	}
	return "", fmt.Errorf("no cluster in the admin kubeconfig")
}

// pointerToken returns the token that dir's <role>.ign presents.
func pointerToken(t *testing.T, dir, role string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, role+".ign"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := ignition.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range cfg.Ignition.Config.Merge {
		for _, h := range m.HTTPHeaders {
			if h.Name == mcsauth.Header && h.Value != nil {
				return strings.TrimPrefix(*h.Value, "Bearer ")
			}
		}
	}
	t.Fatalf("%s.ign presents no token", role)
	return ""
}

// getConfig asks host's machine-config server for role's config, presenting
// token when it is not empty.
func getConfig(host, role, token string) (int, string, error) {
	req, err := http.NewRequest(http.MethodGet, fmt.Sprintf("https://%s/config/%s", net.JoinHostPort(host, fmt.Sprint(nodelayout.MCSPort)), role), nil)
	if err != nil {
		return 0, "", err
	}
	if token != "" {
		req.Header.Set(mcsauth.Header, mcsauth.HeaderValue(token))
	}
	resp, err := insecureClient().Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	return resp.StatusCode, string(body), err
}

// insecureClient trusts any certificate, as `curl -k` does: an attacker
// does not need to verify the server.
func insecureClient() *http.Client {
	return &http.Client{
		Timeout:   3 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, DialContext: clusterDial}, //nolint:gosec // the attacker's view
	}
}
