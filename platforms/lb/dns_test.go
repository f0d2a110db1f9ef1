package lb

import (
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
)

// fakeResolver answers every UDP datagram and every TCP message (2-byte
// length prefix) with the query and "!" appended, on 127.0.0.1.
func fakeResolver(t *testing.T) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", pc.LocalAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close(); ln.Close() })
	go func() {
		buf := make([]byte, 512)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			pc.WriteTo(append(buf[:n:n], '!'), from)
		}
	}()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				var n uint16
				if binary.Read(c, binary.BigEndian, &n) != nil {
					return
				}
				msg := make([]byte, n)
				if _, err := io.ReadFull(c, msg); err != nil {
					return
				}
				msg = append(msg, '!')
				binary.Write(c, binary.BigEndian, uint16(len(msg)))
				c.Write(msg)
			}()
		}
	}()
	return pc.LocalAddr().String()
}

// The forwarder passes a UDP query and a TCP one to the first upstream
// that answers, past one that does not, and the answers back unchanged.
func TestDNSForwards(t *testing.T) {
	// A port nothing answers on: a socket bound and never read.
	dead, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer dead.Close()
	up := fakeResolver(t)
	f, err := listenDNS(logrus.New(), "127.0.0.1:0", func() []string { return []string{dead.LocalAddr().String(), up} })
	if err != nil {
		t.Fatal(err)
	}
	defer f.close()

	c, err := net.Dial("udp", f.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(3 * dnsTimeout))
	c.Write([]byte("query-1"))
	buf := make([]byte, 64)
	n, err := c.Read(buf)
	if err != nil || string(buf[:n]) != "query-1!" {
		t.Errorf("UDP answer %q, %v; want query-1!", buf[:n], err)
	}

	tc, err := net.Dial("tcp", f.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	tc.SetDeadline(time.Now().Add(3 * dnsTimeout))
	binary.Write(tc, binary.BigEndian, uint16(7))
	tc.Write([]byte("query-2"))
	var ln uint16
	if err := binary.Read(tc, binary.BigEndian, &ln); err != nil {
		t.Fatal(err)
	}
	msg := make([]byte, ln)
	if _, err := io.ReadFull(tc, msg); err != nil || string(msg) != "query-2!" {
		t.Errorf("TCP answer %q, %v; want query-2!", msg, err)
	}
}

// Without a resolver the query goes unanswered (the client asks again or
// gives up), and the forwarder still stops.
func TestDNSWithoutResolvers(t *testing.T) {
	f, err := listenDNS(logrus.New(), "127.0.0.1:0", func() []string { return nil })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.exchangeUDP([]byte("q")); err == nil {
		t.Error("exchange without resolvers succeeded")
	}
	f.close() // returns: nothing in flight is left waiting
}

// The balancer starts the forwarder with the config that asks for one,
// and stops it with a reload without.
func TestBalancerAppliesDNS(t *testing.T) {
	b := New(logrus.New())
	defer b.Shutdown(t.Context())
	up := fakeResolver(t)
	port := freePort(t)
	if err := b.Apply(&Config{Listen: "127.0.0.1", DNS: &DNS{Port: port, Upstreams: []string{up}}}); err != nil {
		t.Fatal(err)
	}
	if b.DNSAddr() == nil {
		t.Fatal("no DNS forwarder after a config with dns")
	}
	if err := b.Apply(&Config{Listen: "127.0.0.1"}); err != nil {
		t.Fatal(err)
	}
	if b.DNSAddr() != nil {
		t.Error("the DNS forwarder runs on after a config without dns")
	}
	if err := (&Config{Listen: "127.0.0.1", DNS: &DNS{Port: 70000, Upstreams: []string{"resolver"}}}).Validate(); err == nil {
		t.Error("a bad dns section passed validation")
	}
}
