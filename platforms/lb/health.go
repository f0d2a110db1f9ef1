package lb

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kiln-project/kiln/platforms/netroute"
)

// Bounds of one health check's timeout, which is the check interval
// clamped to them.
const (
	minCheckTimeout = time.Second
	maxCheckTimeout = 5 * time.Second
)

// maxCheckBody bounds how much of a failed HTTPS check's answer is read
// to grade it (kube-apiserver's /readyz lists its checks in a few KiB).
const maxCheckBody = 64 << 10

// shutdownLine starts the line of kube-apiserver's /readyz answer that
// says its "shutdown" check failed: it received SIGTERM and is draining
// ("[-]shutdown failed: reason withheld").
const shutdownLine = "[-]shutdown "

// How many failed checks in a row change what the balancer does with a
// backend, by what the checks saw (HAProxy's "fall", graded):
//   - a backend that refuses or drops TCP connections is gone: it is marked
//     down and its sessions are closed at the first failed check;
//   - one that answers "not ready" (a non-200 /readyz, such as an API server
//     whose etcd member was removed, or whose etcd answers late on a loaded
//     host) is marked down after fallChecks, and its sessions are closed
//     after staleChecks if another backend is healthy: it still answers the
//     requests it has, and cutting them after a few failed etcd checks
//     failed requests in flight (the conformance suite's `unexpected EOF`
//     on a loaded host);
//   - one that answers that it is shutting down (draining: a non-200
//     /readyz whose "shutdown" check failed, an API server that received
//     SIGTERM) is marked down at the first such check, and its sessions
//     are left to it: it serves them on for its --shutdown-delay-duration,
//     then sends HTTP/2 GOAWAY and finishes the requests in flight, so its
//     clients move to another backend without an error, where closing
//     their connections would fail those requests. Once it refuses TCP
//     connections it is gone, as above;
//   - one that accepts connections but does not answer in time is marked
//     down after fallChecks, and its sessions are closed after staleChecks
//     if another backend is healthy, as for "not ready": a busy API server
//     (a loaded host, a large LIST) still serves the requests and watches
//     it has, and cutting them would fail every client at once for a few
//     slow checks.
//
// Sessions are moved off a backend only when there is somewhere better to
// go. With no healthy backend, a backend still reachable keeps its sessions
// and gets new ones (usable): closing them would only make every client
// reconnect to the same backend and list its watches again, which is what
// keeps an API server whose etcd answers late (an emulated host) failing
// its /readyz.
const (
	fallChecks  = 3
	staleChecks = 15
)

// failure grades a failed health check.
type failure int

const (
	// slow: the backend accepted the connection but did not answer in time.
	slow failure = iota
	// notReady: the backend answered that it is not ready.
	notReady
	// draining: the backend answered that it is shutting down (its
	// /readyz "shutdown" check failed) and closes its sessions itself.
	draining
	// unreachable: no TCP connection could be made.
	unreachable
)

// checkError is a failed health check and its grade.
type checkError struct {
	grade failure
	err   error
}

func (e *checkError) Error() string { return e.err.Error() }
func (e *checkError) Unwrap() error { return e.err }

// gradeOf returns how err failed: unreachable, notReady and draining when
// the checker said so, slow otherwise.
func gradeOf(err error) failure {
	var ce *checkError
	if errors.As(err, &ce) {
		return ce.grade
	}
	return slow
}

// checker runs one kind of health check against a backend address; its
// errors carry their grade (checkError).
type checker func(ctx context.Context, addr string) error

// checkDialer connects through d, grading a failure as unreachable.
func checkDialer(d netroute.Dialer) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, &checkError{grade: unreachable, err: err}
		}
		return c, nil
	}
}

// newChecker returns the checker of service s, connecting through d.
func newChecker(s Service, d netroute.Dialer) (checker, error) {
	dialForCheck := checkDialer(d)
	switch s.Health {
	case CheckTCP:
		return func(ctx context.Context, addr string) error {
			c, err := dialForCheck(ctx, "tcp", addr)
			if err != nil {
				return err
			}
			return c.Close()
		}, nil
	case CheckHTTPS:
		tlsCfg := &tls.Config{InsecureSkipVerify: true} //nolint:gosec // health checks only, see Service.CAFile
		if s.CAFile != "" {
			pem, err := os.ReadFile(s.CAFile)
			if err != nil {
				return nil, err
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("%s: no PEM certificate", s.CAFile)
			}
			tlsCfg = &tls.Config{RootCAs: pool}
		}
		client := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsCfg, DisableKeepAlives: true, DialContext: dialForCheck}}
		return func(ctx context.Context, addr string) error {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+s.HealthPath, nil)
			if err != nil {
				return err
			}
			resp, err := client.Do(req)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			// A body cut short (the check's timeout) is graded by what
			// came of it.
			body, _ := io.ReadAll(io.LimitReader(resp.Body, maxCheckBody))
			if shuttingDown(body) {
				return &checkError{grade: draining, err: fmt.Errorf("GET %s: %s: shutting down", s.HealthPath, resp.Status)}
			}
			return &checkError{grade: notReady, err: fmt.Errorf("GET %s: %s", s.HealthPath, resp.Status)}
		}, nil
	}
	return nil, fmt.Errorf("unknown health check %q", s.Health)
}

// shuttingDown reports whether body, the answer to a failed /readyz, has
// a line saying that kube-apiserver's "shutdown" check failed.
func shuttingDown(body []byte) bool {
	for line := range strings.Lines(string(body)) {
		if strings.HasPrefix(line, shutdownLine) {
			return true
		}
	}
	return false
}

// checkLoop checks the service's backends as cfg says, through the
// service's dialer, now and then every interval until ctx is done, logging
// each change of health.
func (b *Balancer) checkLoop(ctx context.Context, svc *service, cfg Service) {
	check, err := newChecker(cfg, svc.dialer)
	if err != nil {
		b.log.Errorf("%s: health check: %v; no backend will be used", cfg.Name, err)
		return
	}
	timeout := max(min(cfg.interval(), maxCheckTimeout), minCheckTimeout)
	// Non-sliding: a round starts every interval, or at once after a
	// round that took longer.
	wait.NonSlidingUntilWithContext(ctx, func(ctx context.Context) {
		var wg sync.WaitGroup
		for _, be := range *svc.backends.Load() {
			wg.Go(func() {
				cctx, cancel := context.WithTimeout(ctx, timeout)
				err := check(cctx, be.addr)
				cancel()
				if ctx.Err() != nil {
					return
				}
				b.record(svc, be, err)
			})
		}
		wg.Wait()
	}, cfg.interval())
}

// record applies one health check's result to be, a backend of svc: the
// rules of fallChecks.
func (b *Balancer) record(svc *service, be *backend, err error) {
	name := svc.name
	if err == nil {
		be.fails.Store(0)
		be.reachable.Store(true)
		if !be.healthy.Swap(true) {
			b.log.Infof("%s: backend %s is healthy", name, be.addr)
		}
		return
	}
	n := be.fails.Add(1)
	msg := err.Error()
	be.lastErr.Store(&msg)
	grade := gradeOf(err)
	be.reachable.Store(grade != unreachable)
	down := grade == unreachable || grade == draining || n >= fallChecks
	if !down {
		b.log.Debugf("%s: backend %s failed %d check(s) in a row, still in use: %v", name, be.addr, n, err)
		return
	}
	wasHealthy := be.healthy.Swap(false)
	if grade == draining {
		// Its sessions end when it closes them (GOAWAY, then its exit).
		if !wasHealthy {
			b.log.Debugf("%s: backend %s still draining (%d sessions): %v", name, be.addr, be.sessions.count(), err)
			return
		}
		conns := "no new connections"
		if !svc.healthyOtherThan(be) {
			conns = "new connections only while no backend is healthy"
		}
		b.log.Infof("%s: backend %s is draining (shutting down): %s, its %d sessions end when it closes them",
			name, be.addr, conns, be.sessions.count())
		return
	}
	closed := 0
	if grade == unreachable || n >= staleChecks && svc.healthyOtherThan(be) {
		closed = be.sessions.closeAll()
	}
	switch {
	case wasHealthy:
		still := ""
		if grade != unreachable {
			still = "; it still gets new connections while no backend is healthy"
		}
		b.log.Infof("%s: backend %s is unhealthy after %d failed check(s) (%d sessions closed): %v%s", name, be.addr, n, closed, err, still)
	case closed > 0:
		b.log.Infof("%s: backend %s still unhealthy (%d sessions closed): %v", name, be.addr, closed, err)
	}
}

// healthyOtherThan reports whether a backend of svc other than be passed
// its last check.
func (svc *service) healthyOtherThan(be *backend) bool {
	for _, o := range *svc.backends.Load() {
		if o != be && o.healthy.Load() {
			return true
		}
	}
	return false
}
