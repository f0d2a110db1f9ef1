package etcdmembers

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestClusterVersion(t *testing.T) {
	answer := func(body string) *httptest.Server {
		return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/version" {
				http.NotFound(w, r)
				return
			}
			w.Write([]byte(body))
		}))
	}
	mixed := answer(`{"etcdserver":"3.6.16","etcdcluster":"3.5.0"}`)
	defer mixed.Close()
	undecided := answer(`{"etcdserver":"3.6.16","etcdcluster":"not_decided"}`)
	defer undecided.Close()
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()
	ctx := context.Background()

	// The first member that answers decides; those before it are skipped.
	got, err := ClusterVersion(ctx, http.DefaultClient, []string{down.URL, undecided.URL, mixed.URL + "/"})
	if err != nil || got != "3.5.0" {
		t.Errorf("ClusterVersion = %q, %v; want 3.5.0", got, err)
	}
	// None answers: every one is named, with why.
	_, err = ClusterVersion(ctx, http.DefaultClient, []string{down.URL, undecided.URL})
	if err == nil || !strings.Contains(err.Error(), down.URL+": ") || !strings.Contains(err.Error(), undecided.URL+": etcd 3.6.16 has no cluster version yet") {
		t.Errorf("want both members named, got %v", err)
	}
	if _, err := ClusterVersion(ctx, http.DefaultClient, nil); err == nil {
		t.Error("no endpoints: want an error")
	}
}
