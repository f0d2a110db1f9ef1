package e2e

import (
	"encoding/binary"
	"net"
	"testing"
	"time"
)

// worldNTPEnv makes the test binary serve NTP (serveWorldNTP) on the
// address it names, port 123: the time server of the hosts' closed LAN
// (platform.ssh.ntpServers).
const worldNTPEnv = "KILN_E2E_WORLD_NTP"

// ntpEpoch is the NTP era's start, 1900-01-01, in Unix seconds.
const ntpEpoch = 2208988800

// ntpTime is t as an NTP timestamp: seconds since 1900, and a binary
// fraction.
func ntpTime(t time.Time) uint64 {
	secs := uint64(t.Unix() + ntpEpoch)
	frac := uint64(t.Nanosecond()) << 32 / 1e9
	return secs<<32 | frac
}

// serveWorldNTP answers the NTP client requests (mode 3) that reach pc as
// a stratum-1 server of its own clock (RFC 5905's server mode 4): leap
// indicator 0, the client's version, its transmit time as the origin, and
// this machine's time, the test hosts' own (they share its kernel), when
// received and sent.
func serveWorldNTP(pc net.PacketConn) error {
	buf := make([]byte, 512)
	for {
		n, from, err := pc.ReadFrom(buf)
		received := time.Now()
		if err != nil {
			return err
		}
		if n < 48 || buf[0]&0x7 != 3 {
			continue
		}
		version := buf[0] >> 3 & 0x7
		resp := make([]byte, 48)
		resp[0] = version<<3 | 4
		resp[1] = 1                                     // stratum: a primary server
		resp[2] = buf[2]                                // the client's poll interval
		resp[3] = 0xEC                                  // precision: 2^-20 s
		binary.BigEndian.PutUint32(resp[8:], 1<<16/100) // root dispersion: 10 ms
		copy(resp[12:16], "KILN")                       // reference ID of a primary server
		binary.BigEndian.PutUint64(resp[16:], ntpTime(received))
		copy(resp[24:32], buf[40:48]) // origin: the client's transmit time
		binary.BigEndian.PutUint64(resp[32:], ntpTime(received))
		binary.BigEndian.PutUint64(resp[40:], ntpTime(time.Now()))
		pc.WriteTo(resp, from)
	}
}

// TestWorldNTP: the LAN's time server answers a client's request as
// chrony expects: server mode, the request's version, its transmit time as
// the origin, and a transmit time of now. It needs no machine.
func TestWorldNTP(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	go serveWorldNTP(pc)
	c, err := net.Dial("udp", pc.LocalAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	req := make([]byte, 48)
	req[0] = 4<<3 | 3 // version 4, client
	binary.BigEndian.PutUint64(req[40:], 0x0123456789abcdef)
	if _, err := c.Write(req); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp := make([]byte, 64)
	n, err := c.Read(resp)
	if err != nil || n != 48 {
		t.Fatalf("answer of %d bytes: %v", n, err)
	}
	sent := binary.BigEndian.Uint64(resp[40:])
	at := time.Unix(int64(sent>>32)-ntpEpoch, int64((sent&0xffffffff)*1e9>>32))
	if resp[0] != 4<<3|4 || resp[1] != 1 || binary.BigEndian.Uint64(resp[24:]) != 0x0123456789abcdef || time.Since(at).Abs() > time.Second {
		t.Errorf("answer %x: want version 4, server mode, stratum 1, the request's transmit time as origin, sent now (it says %s)", resp[:48], at)
	}
}
