package lb

import (
	"context"
	"errors"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/kiln-project/kiln/platforms/resolvers"
)

// DNS is the balancer's DNS forwarder (Config.DNS): on a connected local
// cluster (networking.egress NAT) the machines' resolver is the host's
// address on the bridge, where the forwarder passes every query, UDP or
// TCP, unchanged to the host's own resolvers and the answer back. The host's
// resolver may listen on 127.0.0.53, which a machine cannot reach; the
// forwarder can.
type DNS struct {
	// Port is the port it listens on at Config.Listen; DefaultDNSPort
	// when 0.
	Port int `json:"port,omitempty"`
	// Upstreams are the resolvers as "ip" or "ip:port"; when empty, the
	// host's, read from its resolv.conf files (resolvers.ResolvConfs) again
	// whenever one changed.
	Upstreams []string `json:"upstreams,omitempty"`
}

// DefaultDNSPort is where the forwarder listens unless DNS.Port says.
const DefaultDNSPort = 53

// dnsTimeout bounds one exchange with one upstream.
const dnsTimeout = 2 * time.Second

// maxDNSQueries bounds the UDP queries in flight.
const maxDNSQueries = 256

// dnsForwarder is a running DNS forwarder.
type dnsForwarder struct {
	log       logrus.FieldLogger
	udp       net.PacketConn
	tcp       net.Listener
	upstreams func() []string
	wg        sync.WaitGroup
	slots     chan struct{}
}

// startDNS listens on listen:port (UDP and TCP) and forwards to d's
// upstreams, or the host's.
func startDNS(log logrus.FieldLogger, listen string, d DNS) (*dnsForwarder, error) {
	port := d.Port
	if port == 0 {
		port = DefaultDNSPort
	}
	upstreams := (&hostResolvers{files: resolvers.ResolvConfs()}).get
	if len(d.Upstreams) > 0 {
		ups := withPort(d.Upstreams, DefaultDNSPort)
		upstreams = func() []string { return ups }
	}
	return listenDNS(log, net.JoinHostPort(listen, strconv.Itoa(port)), upstreams)
}

// listenDNS listens on addr (UDP, and TCP on the same port) and forwards
// to upstreams.
func listenDNS(log logrus.FieldLogger, addr string, upstreams func() []string) (*dnsForwarder, error) {
	udp, err := net.ListenPacket("udp", addr)
	if err != nil {
		return nil, err
	}
	tcp, err := net.Listen("tcp", udp.LocalAddr().String())
	if err != nil {
		udp.Close()
		return nil, err
	}
	f := &dnsForwarder{log: log, udp: udp, tcp: tcp, upstreams: upstreams, slots: make(chan struct{}, maxDNSQueries)}
	f.wg.Add(2)
	go f.serveUDP()
	go f.serveTCP()
	log.Infof("Forwarding DNS on %s (udp and tcp) to %s", udp.LocalAddr(), strings.Join(upstreams(), ", "))
	return f, nil
}

// Addr returns where the forwarder listens.
func (f *dnsForwarder) Addr() net.Addr { return f.udp.LocalAddr() }

// close stops listening and waits for the exchanges in flight.
func (f *dnsForwarder) close() {
	f.udp.Close()
	f.tcp.Close()
	f.wg.Wait()
}

func (f *dnsForwarder) serveUDP() {
	defer f.wg.Done()
	buf := make([]byte, 65535)
	for {
		n, client, err := f.udp.ReadFrom(buf)
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				f.log.Warnf("dns: %v", err)
			}
			return
		}
		select {
		case f.slots <- struct{}{}:
		default:
			continue // too many in flight: the client asks again
		}
		query := append([]byte(nil), buf[:n]...)
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			defer func() { <-f.slots }()
			if answer, err := f.exchangeUDP(query); err == nil {
				f.udp.WriteTo(answer, client)
			} else {
				f.log.Debugf("dns: %v", err)
			}
		}()
	}
}

// exchangeUDP asks each upstream in turn until one answers.
func (f *dnsForwarder) exchangeUDP(query []byte) ([]byte, error) {
	ups := f.upstreams()
	if len(ups) == 0 {
		return nil, errors.New("the host names no resolver")
	}
	var errs []error
	for _, up := range ups {
		c, err := net.DialTimeout("udp", up, dnsTimeout)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		c.SetDeadline(time.Now().Add(dnsTimeout))
		buf := make([]byte, 65535)
		_, err = c.Write(query)
		n := 0
		if err == nil {
			n, err = c.Read(buf)
		}
		c.Close()
		if err == nil {
			return buf[:n], nil
		}
		errs = append(errs, err)
	}
	return nil, errors.Join(errs...)
}

func (f *dnsForwarder) serveTCP() {
	defer f.wg.Done()
	for {
		c, err := f.tcp.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				f.log.Warnf("dns: %v", err)
			}
			return
		}
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			f.proxyTCP(c)
		}()
	}
}

// proxyTCP joins a client's connection to the first upstream that takes
// one, until either side closes or both are quiet for dnsTimeout × 5.
func (f *dnsForwarder) proxyTCP(client net.Conn) {
	defer client.Close()
	var up net.Conn
	for _, a := range f.upstreams() {
		c, err := net.DialTimeout("tcp", a, dnsTimeout)
		if err == nil {
			up = c
			break
		}
	}
	if up == nil {
		return
	}
	defer up.Close()
	idle := 5 * dnsTimeout
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	copyQuiet := func(dst, src net.Conn) {
		defer cancel()
		buf := make([]byte, 32*1024)
		for {
			src.SetReadDeadline(time.Now().Add(idle))
			n, err := src.Read(buf)
			if n > 0 {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	}
	go copyQuiet(up, client)
	go copyQuiet(client, up)
	<-ctx.Done()
}

// hostResolvers reads the host's resolvers from files, again whenever one
// changed.
type hostResolvers struct {
	files []string
	mu    sync.Mutex
	stamp string
	ups   []string
}

// get returns the host's resolvers as ip:port: the nameservers of the
// first file, unless all of them are loopback addresses and a later file
// (systemd-resolved's) names others.
func (h *hostResolvers) get() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var stamp strings.Builder
	for _, f := range h.files {
		if st, err := os.Stat(f); err == nil {
			stamp.WriteString(f + st.ModTime().String() + strconv.FormatInt(st.Size(), 10))
		}
	}
	if stamp.String() == h.stamp && h.ups != nil {
		return h.ups
	}
	h.stamp = stamp.String()
	h.ups = resolvers.Of(h.files, os.ReadFile)
	return h.ups
}
