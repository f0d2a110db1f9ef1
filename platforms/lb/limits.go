package lb

import (
	"errors"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// refusalLogInterval is the least time between two warnings about
// connections refused at a service's cap: a flood of connections writes
// one line a minute, not one per connection.
const refusalLogInterval = time.Minute

// copyBuffer is the size of the buffer of each direction of a connection
// with an idle timeout.
const copyBuffer = 32 << 10

// limits are a service's idle timeout and connection cap, and what they
// count. Apply sets the settings; the proxying goroutines read them.
type limits struct {
	// idle is the idle timeout (a time.Duration); 0 is none.
	idle atomic.Int64
	// maxConns caps active; 0 is no cap.
	maxConns atomic.Int64
	// active counts the connections accepted and not yet finished.
	active  atomic.Int64
	refused refusals
}

// admit counts one more active connection unless the service is at its
// cap; it reports whether it did.
func (l *limits) admit() bool {
	for {
		n, limit := l.active.Load(), l.maxConns.Load()
		if limit > 0 && n >= limit {
			return false
		}
		if l.active.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// refuse resets a connection the service has no room for, and warns about
// it at most once per refusalLogInterval.
func (b *Balancer) refuse(svc *service, c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetLinger(0) // a reset: the client learns at once, and no TIME_WAIT is left here
	}
	c.Close()
	if n := svc.refused.add(time.Now()); n > 0 {
		b.log.Warnf("%s: at its cap of %d connections at once; refused %d new connection(s) since the last warning "+
			"(this warning repeats at most every %s)", svc.name, svc.maxConns.Load(), n, refusalLogInterval)
	}
}

// refusals counts the connections a service refused, for its warnings.
type refusals struct {
	mu     sync.Mutex
	warned time.Time // when the last warning was due
	count  int       // refused since then
}

// add counts one refusal at now. When a warning is due (none in the last
// refusalLogInterval) it returns how many connections to report, this one
// and those refused since the last warning; otherwise 0.
func (r *refusals) add(now time.Time) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.count++
	if !r.warned.IsZero() && now.Sub(r.warned) < refusalLogInterval {
		return 0
	}
	n := r.count
	r.warned, r.count = now, 0
	return n
}

// idlePipe is one proxied connection with an idle timeout: it ends when
// neither direction has moved a byte for idle.
type idlePipe struct {
	idle time.Duration
	// last is when a byte last moved either way (Unix nanoseconds).
	last atomic.Int64
}

func (p *idlePipe) touch() { p.last.Store(time.Now().UnixNano()) }

// deadline is when the pipe is idle unless a byte moves before.
func (p *idlePipe) deadline() time.Time { return time.Unix(0, p.last.Load()).Add(p.idle) }

// pipeIdle proxies client and up both ways, as copyHalf does, and closes
// both once neither direction has moved a byte for idle.
func (b *Balancer) pipeIdle(name string, client, up net.Conn, idle time.Duration) {
	p := &idlePipe{idle: idle}
	p.touch()
	var once sync.Once
	closeIdle := func() {
		once.Do(func() {
			b.log.Debugf("%s: closing the connection of %s, idle for %s", name, client.RemoteAddr(), idle)
			client.Close()
			up.Close()
		})
	}
	var wg sync.WaitGroup
	for _, dir := range [][2]net.Conn{{up, client}, {client, up}} {
		wg.Go(func() {
			if p.copy(dir[0], dir[1]) {
				closeIdle()
			}
		})
	}
	wg.Wait()
	client.Close()
	up.Close()
}

// copy copies src to dst until src ends, then half-closes dst for writing
// (as copyHalf); it returns true instead when the pipe went idle: no byte
// read or written either way for p.idle. A read or write that waits past
// the deadline while the other direction moves bytes goes on waiting.
func (p *idlePipe) copy(dst, src net.Conn) (idle bool) {
	buf := make([]byte, copyBuffer)
	for {
		src.SetReadDeadline(p.deadline())
		n, err := src.Read(buf)
		if n > 0 {
			p.touch()
			if idle, ok := p.write(dst, buf[:n]); !ok {
				if !idle {
					closeWrite(dst)
				}
				return idle
			}
		}
		switch {
		case err == nil:
		case errors.Is(err, os.ErrDeadlineExceeded):
			if !time.Now().Before(p.deadline()) {
				return true
			}
		default:
			closeWrite(dst)
			return false
		}
	}
}

// write writes data to dst; ok is false when it could not, idle then
// telling whether the pipe went idle meanwhile.
func (p *idlePipe) write(dst net.Conn, data []byte) (idle, ok bool) {
	for len(data) > 0 {
		dst.SetWriteDeadline(p.deadline())
		n, err := dst.Write(data)
		if n > 0 {
			p.touch()
			data = data[n:]
		}
		switch {
		case err == nil:
		case errors.Is(err, os.ErrDeadlineExceeded):
			if !time.Now().Before(p.deadline()) {
				return true, false
			}
		default:
			return false, false
		}
	}
	return false, true
}

// closeWrite half-closes c for writing, or closes it when it cannot.
func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	} else {
		c.Close()
	}
}
