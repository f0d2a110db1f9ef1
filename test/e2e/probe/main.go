// Command probe is what the e2e suite runs in a pod to see what the pod
// reaches: it is built static and packed into an image of its own
// (world_test.go), since the nodes hold no image with an HTTP client.
//
//	probe http URL   GET URL, print the status and the body, exit 1 on failure
//	probe dns NAME   look NAME up twice, print the addresses and each
//	                 lookup's time (the first asks upstream, the second is
//	                 answered from CoreDNS's cache), exit 1 on failure
//
// It gives up after 10 s: a sealed cluster's pod must fail fast.
package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"
)

func main() {
	if len(os.Args) != 3 || os.Args[1] != "http" && os.Args[1] != "dns" {
		fmt.Fprintln(os.Stderr, "usage: probe http URL | probe dns NAME")
		os.Exit(2)
	}
	start := time.Now()
	do := get
	if os.Args[1] == "dns" {
		do = lookup
	}
	if err := do(os.Args[2]); err != nil {
		fmt.Printf("probe: %v (after %s)\n", err, time.Since(start).Round(time.Millisecond))
		os.Exit(1)
	}
}

// get fetches url and prints what it answered.
func get(url string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if err != nil {
		return err
	}
	fmt.Printf("%d %s\n", resp.StatusCode, body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return nil
}

// lookup resolves name twice with Go's own resolver and prints the
// addresses and both durations.
func lookup(name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r := &net.Resolver{PreferGo: true}
	var took [2]time.Duration
	var addrs []string
	for i := range took {
		start := time.Now()
		a, err := r.LookupHost(ctx, name)
		if err != nil {
			return err
		}
		took[i], addrs = time.Since(start), a
	}
	fmt.Printf("%s %v: cold %s, cached %s\n", name, addrs, took[0].Round(10*time.Microsecond), took[1].Round(10*time.Microsecond))
	return nil
}
