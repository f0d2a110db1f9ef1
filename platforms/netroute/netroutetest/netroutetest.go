// Package netroutetest holds helpers for tests of code that dials.
package netroutetest

import (
	"fmt"
	"syscall"
	"testing"
)

// RefusingAddr returns a loopback address (host:port) that refuses
// connections for the rest of the test: a socket bound to it that never
// listens holds the port, so no other test or process can take it over,
// as it could the port of a listener closed to free it.
func RefusingAddr(t *testing.T) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("127.0.0.1:%d", sa.(*syscall.SockaddrInet4).Port)
}
