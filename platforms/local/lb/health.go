package lb

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync"
	"time"
)

// Bounds of one health check's timeout, which is the check interval
// clamped to them.
const (
	minCheckTimeout = time.Second
	maxCheckTimeout = 5 * time.Second
)

// checker runs one kind of health check against a backend address.
type checker func(ctx context.Context, addr string) error

// newChecker returns the checker of service s.
func newChecker(s Service) (checker, error) {
	switch s.Health {
	case CheckTCP:
		return func(ctx context.Context, addr string) error {
			var d net.Dialer
			c, err := d.DialContext(ctx, "tcp", addr)
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
		client := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsCfg, DisableKeepAlives: true}}
		return func(ctx context.Context, addr string) error {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+s.HealthPath, nil)
			if err != nil {
				return err
			}
			resp, err := client.Do(req)
			if err != nil {
				return err
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("GET %s: %s", s.HealthPath, resp.Status)
			}
			return nil
		}, nil
	}
	return nil, fmt.Errorf("unknown health check %q", s.Health)
}

// checkLoop checks the service's backends as cfg says, now and then every
// interval until ctx is done, logging each change of health.
func (b *Balancer) checkLoop(ctx context.Context, svc *service, cfg Service) {
	check, err := newChecker(cfg)
	if err != nil {
		b.log.Errorf("%s: health check: %v; no backend will be used", cfg.Name, err)
		return
	}
	timeout := max(min(cfg.interval(), maxCheckTimeout), minCheckTimeout)
	t := time.NewTicker(cfg.interval())
	defer t.Stop()
	for {
		var wg sync.WaitGroup
		for _, be := range *svc.backends.Load() {
			wg.Add(1)
			go func() {
				defer wg.Done()
				cctx, cancel := context.WithTimeout(ctx, timeout)
				err := check(cctx, be.addr)
				cancel()
				if ctx.Err() != nil {
					return
				}
				if was := be.healthy.Swap(err == nil); was != (err == nil) {
					if err == nil {
						b.log.Infof("%s: backend %s is healthy", cfg.Name, be.addr)
					} else {
						n := be.sessions.closeAll()
						b.log.Infof("%s: backend %s is unhealthy (%d sessions closed): %v", cfg.Name, be.addr, n, err)
					}
				}
			}()
		}
		wg.Wait()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
