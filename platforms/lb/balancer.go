package lb

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/kiln-project/kiln/platforms/netroute"
)

// dialTimeout bounds a connection attempt to one backend.
const dialTimeout = 3 * time.Second

// Balancer proxies TCP connections for a set of services. Apply starts,
// updates and stops services to match a Config; Shutdown stops them all.
type Balancer struct {
	log logrus.FieldLogger

	mu       sync.Mutex
	services map[string]*service
	// dns is the DNS forwarder of the config, dnsKey what it was started
	// with (listen address and settings); nil without one.
	dns    *dnsForwarder
	dnsKey string
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// New returns a Balancer with no services.
func New(log logrus.FieldLogger) *Balancer {
	return &Balancer{log: log, services: map[string]*service{}, conns: map[net.Conn]struct{}{}}
}

// service is one listener with its backend pool. Its fields other than the
// atomics are written by Apply under Balancer.mu; its name never changes
// (it is part of the service's key). The health-check loop gets its own
// copy of the configuration, so no goroutine reads one Apply replaces.
type service struct {
	name     string
	ln       net.Listener
	backends atomic.Pointer[[]*backend]
	next     atomic.Uint64
	stop     context.CancelFunc
	// dialer connects to backends, health checks included: only through
	// the interface holding the listen address (the cluster's bridge), so
	// no connection to a machine's address leaves through another route
	// once the bridge is gone (netroute.Beside).
	dialer netroute.Dialer
	limits
}

// backend is one backend address, its health and its sessions.
type backend struct {
	addr    string
	healthy atomic.Bool
	// fails counts the health checks failed in a row.
	fails atomic.Int32
	// reachable says its last check reached it (it passed, timed out or
	// answered "not ready"): it still accepts connections.
	reachable atomic.Bool
	// lastErr is the last failed check's error.
	lastErr  atomic.Pointer[string]
	sessions sessions
}

// serviceKey identifies a listener across reloads.
func serviceKey(listen string, s Service) string {
	return s.Name + "@" + s.listenAddr(listen)
}

// Apply makes the running services match cfg: new services start listening,
// removed ones stop (their open connections continue), and the backends,
// health checks and limits of kept ones are replaced, keeping the health of
// backends present before and after. New limits apply to new connections.
func (b *Balancer) Apply(cfg *Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.applyDNS(cfg); err != nil {
		return err
	}
	want := map[string]Service{}
	for _, s := range cfg.Services {
		want[serviceKey(cfg.Listen, s)] = s
	}
	for key, svc := range b.services {
		if _, ok := want[key]; !ok {
			b.log.Infof("Stopping %s on %s", svc.name, svc.ln.Addr())
			svc.stop()
			svc.ln.Close()
			delete(b.services, key)
		}
	}
	for key, s := range want {
		svc, ok := b.services[key]
		if !ok {
			ln, err := net.Listen("tcp", s.listenAddr(cfg.Listen))
			if err != nil {
				return fmt.Errorf("service %s: %w", s.Name, err)
			}
			svc = &service{name: s.Name, ln: ln, dialer: backendDialer(cfg.Listen)}
			b.services[key] = svc
			b.wg.Add(1)
			go b.accept(svc)
			b.log.Infof("Balancing %s on %s", s.Name, ln.Addr())
		} else {
			svc.stop()
		}
		svc.backends.Store(mergeBackends(svc.backends.Load(), s.backendAddrs()))
		svc.idle.Store(int64(s.idleTimeout()))
		svc.maxConns.Store(int64(s.MaxConns))
		ctx, cancel := context.WithCancel(context.Background())
		svc.stop = cancel
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			b.checkLoop(ctx, svc, s)
		}()
	}
	return nil
}

// applyDNS starts, restarts or stops the DNS forwarder to match cfg.DNS.
func (b *Balancer) applyDNS(cfg *Config) error {
	key := ""
	if cfg.DNS != nil {
		key = fmt.Sprintf("%s %+v", cfg.Listen, *cfg.DNS)
	}
	if key == b.dnsKey {
		return nil
	}
	if b.dns != nil {
		b.dns.close()
		b.dns, b.dnsKey = nil, ""
	}
	if cfg.DNS == nil {
		return nil
	}
	f, err := startDNS(b.log, cfg.Listen, *cfg.DNS)
	if err != nil {
		return fmt.Errorf("dns: %w", err)
	}
	b.dns, b.dnsKey = f, key
	return nil
}

// DNSAddr returns where the DNS forwarder listens, nil without one.
func (b *Balancer) DNSAddr() net.Addr {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.dns == nil {
		return nil
	}
	return b.dns.Addr()
}

// backendDialer returns the dialer of the backends of services listening
// on listen. A balancer on a cluster's own address (the local platform's
// API VIP on its bridge) dials only beside it (netroute.Beside); one on
// loopback or on every address (the ssh hosts' API proxy on 127.0.0.1,
// whose masters are the user's hosts) dials its backends through the
// host's routes.
func backendDialer(listen string) netroute.Dialer {
	var policy netroute.Policy = netroute.Anywhere{}
	if a, err := netip.ParseAddr(listen); err == nil && !a.IsUnspecified() && !a.IsLoopback() {
		policy = netroute.Beside{Addr: a}
	}
	return netroute.Dialer{Policy: policy}
}

// mergeBackends returns backends for addrs, reusing old entries (and their
// health) for addresses already known. The sessions of backends no longer
// listed are closed.
func mergeBackends(old *[]*backend, addrs []string) *[]*backend {
	known := map[string]*backend{}
	if old != nil {
		for _, be := range *old {
			known[be.addr] = be
		}
	}
	out := make([]*backend, 0, len(addrs))
	for _, a := range addrs {
		if be, ok := known[a]; ok {
			out = append(out, be)
			delete(known, a)
			continue
		}
		out = append(out, &backend{addr: a})
	}
	for _, gone := range known {
		gone.sessions.closeAll()
	}
	return &out
}

// Addr returns the bound address of the named service, or nil.
func (b *Balancer) Addr(name string) net.Addr {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, svc := range b.services {
		if svc.name == name {
			return svc.ln.Addr()
		}
	}
	return nil
}

// Shutdown stops listening and health checking, waits for open connections
// to finish until ctx is done, then closes those left.
func (b *Balancer) Shutdown(ctx context.Context) error {
	b.mu.Lock()
	for key, svc := range b.services {
		svc.stop()
		svc.ln.Close()
		delete(b.services, key)
	}
	if b.dns != nil {
		b.dns.close()
		b.dns, b.dnsKey = nil, ""
	}
	b.mu.Unlock()
	done := make(chan struct{})
	go func() {
		b.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
	}
	b.mu.Lock()
	b.closed = true
	for c := range b.conns {
		c.Close()
	}
	b.mu.Unlock()
	<-done
	return ctx.Err()
}

// accept serves a service's listener until it is closed.
func (b *Balancer) accept(svc *service) {
	defer b.wg.Done()
	for {
		c, err := svc.ln.Accept()
		if err != nil {
			return
		}
		if !svc.admit() {
			b.refuse(svc, c)
			continue
		}
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			defer svc.active.Add(-1)
			b.handle(svc, c)
		}()
	}
}

// usable returns the backends new connections go to: those whose last
// check passed; when none did, those still reachable, which timed out or
// answered "not ready" (Envoy's "panic mode", narrowed to backends that
// still accept connections). A control plane on a host so loaded that
// /readyz takes longer than the check's timeout, or that its etcd check
// fails now and then, still serves, slowly, instead of every client
// getting EOF until the checks catch up; a backend that refuses
// connections never gets them.
func (svc *service) usable() []*backend {
	all := svc.backends.Load()
	healthy := make([]*backend, 0, len(*all))
	var reachable []*backend
	for _, be := range *all {
		switch {
		case be.healthy.Load():
			healthy = append(healthy, be)
		case be.reachable.Load():
			reachable = append(reachable, be)
		}
	}
	if len(healthy) > 0 {
		return healthy
	}
	return reachable
}

// dial connects to the next usable backend round-robin, trying the others
// when it fails; it returns nil when none answers.
func (svc *service) dial() (net.Conn, *backend) {
	hs := svc.usable()
	if len(hs) == 0 {
		return nil, nil
	}
	start := svc.next.Add(1) - 1
	for i := range hs {
		be := hs[(start+uint64(i))%uint64(len(hs))]
		ctx, cancel := context.WithTimeout(context.Background(), dialTimeout)
		c, err := svc.dialer.DialContext(ctx, "tcp", be.addr)
		cancel()
		if err == nil {
			return c, be
		}
	}
	return nil, nil
}

// handle proxies one client connection; with no usable backend it closes it.
func (b *Balancer) handle(svc *service, client net.Conn) {
	up, be := svc.dial()
	if up == nil {
		b.log.Debugf("%s: no usable backend for %s", svc.name, client.RemoteAddr())
		client.Close()
		return
	}
	if !b.track(client, up) {
		client.Close()
		up.Close()
		return
	}
	defer b.untrack(client, up)
	be.sessions.add(client)
	defer be.sessions.remove(client)
	if idle := time.Duration(svc.idle.Load()); idle > 0 {
		b.pipeIdle(svc.name, client, up, idle)
		return
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); copyHalf(up, client) }()
	go func() { defer wg.Done(); copyHalf(client, up) }()
	wg.Wait()
	client.Close()
	up.Close()
}

// track records open connections for Shutdown; it returns false once
// Shutdown has closed the connections left.
func (b *Balancer) track(cs ...net.Conn) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return false
	}
	for _, c := range cs {
		b.conns[c] = struct{}{}
	}
	return true
}

func (b *Balancer) untrack(cs ...net.Conn) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, c := range cs {
		delete(b.conns, c)
	}
}

// copyHalf copies src to dst, then half-closes dst for writing so the peer
// sees EOF while the other direction continues.
func copyHalf(dst, src net.Conn) {
	io.Copy(dst, src)
	closeWrite(dst)
}
