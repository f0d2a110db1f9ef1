package lb

import (
	"io"
	"net"
	"testing"
)

// BenchmarkProxyThroughput measures bytes per second through the balancer
// over loopback to an echo backend (each byte crosses the proxy twice).
func BenchmarkProxyThroughput(b *testing.B) {
	echo := echoServer(b)
	lb := startBalancer(b, &Config{Listen: "127.0.0.1", Services: []Service{tcpService("api", echo)}})
	eventually(b, "healthy backend", func() bool { return healthyCount(lb, "api") == 1 })
	c, err := net.Dial("tcp", lb.Addr("api").String())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	chunk := make([]byte, 256<<10)
	buf := make([]byte, len(chunk))
	b.SetBytes(int64(len(chunk)))
	b.ResetTimer()
	errc := make(chan error, 1)
	go func() {
		for range b.N {
			if _, err := c.Write(chunk); err != nil {
				errc <- err
				return
			}
		}
		errc <- nil
	}()
	for range b.N {
		if _, err := io.ReadFull(c, buf); err != nil {
			b.Fatal(err)
		}
	}
	if err := <-errc; err != nil {
		b.Fatal(err)
	}
}

// BenchmarkProxyConnections measures new proxied connections per second,
// each carrying one small request and answer.
func BenchmarkProxyConnections(b *testing.B) {
	echo := echoServer(b)
	lb := startBalancer(b, &Config{Listen: "127.0.0.1", Services: []Service{tcpService("api", echo)}})
	eventually(b, "healthy backend", func() bool { return healthyCount(lb, "api") == 1 })
	addr := lb.Addr("api").String()
	msg := []byte("GET /readyz")
	buf := make([]byte, len(msg))
	b.ResetTimer()
	for range b.N {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			b.Fatal(err)
		}
		c.Write(msg)
		if _, err := io.ReadFull(c, buf); err != nil {
			b.Fatal(err)
		}
		c.Close()
	}
}
