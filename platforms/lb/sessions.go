package lb

import (
	"net"
	"sync"
)

// sessions are the client connections proxied to one backend. When the
// backend is removed, gone (refusing connections), or failing its checks
// for staleChecks while another backend is healthy — never while it is
// draining (an API server shutting down, which closes them itself,
// gracefully, once its shutdown delay is over) — they are closed
// (HAProxy's "on-marked-down shutdown-sessions"): a client with a long-lived
// connection — a kubelet's or client-go's HTTP/2 connection to the API — would
// otherwise keep talking to a dead API server that still answers TCP and
// HTTP/2 pings, such as the bootstrap machine's after its etcd member is
// removed, and never reconnect to a healthy one.
type sessions struct {
	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

func (s *sessions) add(c net.Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conns == nil {
		s.conns = map[net.Conn]struct{}{}
	}
	s.conns[c] = struct{}{}
}

func (s *sessions) remove(c net.Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.conns, c)
}

// closeAll closes every session and returns how many there were.
func (s *sessions) closeAll() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.conns)
	for c := range s.conns {
		c.Close()
	}
	s.conns = nil
	return n
}

// count returns how many sessions there are.
func (s *sessions) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}
