// Command probe is what the e2e suite runs in a pod to see what the pod
// reaches: it is built static and packed into an image of its own
// (world_test.go), since the nodes hold no image with an HTTP client.
//
//	probe http URL   GET URL, print the status and the body, exit 1 on failure
//
// It gives up after 10 s: a sealed cluster's pod must fail fast.
package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
)

func main() {
	if len(os.Args) != 3 || os.Args[1] != "http" {
		fmt.Fprintln(os.Stderr, "usage: probe http URL")
		os.Exit(2)
	}
	start := time.Now()
	if err := get(os.Args[2]); err != nil {
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
