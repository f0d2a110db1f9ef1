package probe

import (
	"context"
	"net"
	"path/filepath"
	"testing"
	"time"
)

func TestServeAndGet(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, addr, "hello from kiln") }()
	var body string
	for i := 0; i < 50; i++ {
		if body, err = Get(context.Background(), "http://"+addr+"/"); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if body != "hello from kiln" {
		t.Fatalf("body = %q, err = %v", body, err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if addrs, err := Resolve(context.Background(), "localhost"); err != nil || len(addrs) == 0 {
		t.Fatalf("resolve localhost: %v %v", addrs, err)
	}
}

func TestPersist(t *testing.T) {
	path := filepath.Join(t.TempDir(), "probe.txt")
	if got, found, err := Persist(path, "first"); err != nil || found || got != "first" {
		t.Fatalf("first Persist = %q, %v, %v; want it to write", got, found, err)
	}
	if got, found, err := Persist(path, "second"); err != nil || !found || got != "first" {
		t.Fatalf("second Persist = %q, %v, %v; want it to read what the first wrote", got, found, err)
	}
	if _, _, err := Persist(filepath.Join(t.TempDir(), "missing", "probe.txt"), "x"); err == nil {
		t.Error("Persist into a missing directory succeeded")
	}
}
