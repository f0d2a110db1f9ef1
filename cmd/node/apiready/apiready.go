// Package apiready holds a pod back until the API server of its own host
// is ready, on a host that runs one: the init container of MetalLB's
// speaker, so that a master coming back (its host started again, or back
// on the network) announces the API VIP only once its API server answers.
// Until then the master's kube-apiserver endpoint may still read ready in
// the API (its kubelet had no chance to say otherwise while the host was
// away), which the speaker would take as leave to announce.
package apiready

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"time"
)

// Waiter waits for the API server of its host.
type Waiter struct {
	// URL is the API server's readiness endpoint on the host's loopback.
	URL string
	// Manifest is the API server's static pod manifest: a host without
	// it runs no API server, and nothing is waited for.
	Manifest string
	// Every is how often URL is asked.
	Every time.Duration
	// Client asks URL; a client that does not verify the server's
	// certificate when nil, as kubelet's probe asks: the answer only
	// decides when the pod starts, and nothing of it is trusted.
	Client *http.Client
	// Log is told what is waited for, once, and why it is not ready yet,
	// when that changes.
	Log func(string)
}

// Wait returns once URL answers 200 "ok", at once when the host has no
// Manifest, or when ctx ends.
func (w Waiter) Wait(ctx context.Context) error {
	if _, err := os.Stat(w.Manifest); errors.Is(err, fs.ErrNotExist) {
		w.Log(fmt.Sprintf("no %s: this host runs no API server to wait for", w.Manifest))
		return nil
	} else if err != nil {
		return err
	}
	client := w.Client
	if client == nil {
		client = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // a readiness probe, as kubelet's
		}}
	}
	w.Log("waiting for the API server at " + w.URL)
	last := ""
	for {
		why := ask(ctx, client, w.URL)
		if ctx.Err() != nil {
			return fmt.Errorf("the API server at %s: %w (last: %s)", w.URL, ctx.Err(), last)
		}
		if why == "" {
			w.Log("the API server at " + w.URL + " is ready")
			return nil
		}
		if why != last {
			w.Log("not ready: " + why)
			last = why
		}
		// When ctx ends meanwhile, the next question fails at once and
		// the check above returns.
		select {
		case <-ctx.Done():
		case <-time.After(w.Every):
		}
	}
}

// ask returns why url does not answer 200 "ok", or "".
func ask(ctx context.Context, client *http.Client, url string) string {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err.Error()
	}
	resp, err := client.Do(req)
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode != http.StatusOK || string(body) != "ok" {
		return fmt.Sprintf("%s: %.80q", resp.Status, body)
	}
	return ""
}
