package registry

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// fakeRegistry is an in-memory registry serving the part of the OCI
// distribution API that Push uses, with a registry's checks: an upload's
// bytes must match its digest and size, and a manifest may only name blobs
// its repository holds. It counts the uploads of each digest.
type fakeRegistry struct {
	mu        sync.Mutex
	blobs     map[string][]byte            // digest -> content
	repos     map[string]map[string]bool   // repository -> digests it holds
	manifests map[string]map[string][]byte // repository -> tag -> manifest
	uploads   map[string]int               // digest -> PUTs that stored it
	mounts    int
	// refuse, when set, answers every POST with this status.
	refuse int
}

func newFakeRegistry(t *testing.T) (*fakeRegistry, string) {
	f := &fakeRegistry{blobs: map[string][]byte{}, repos: map[string]map[string]bool{},
		manifests: map[string]map[string][]byte{}, uploads: map[string]int{}}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, strings.TrimPrefix(srv.URL, "http://")
}

var (
	blobPath     = regexp.MustCompile(`^/v2/(.+)/blobs/(sha256:[0-9a-f]{64})$`)
	uploadPath   = regexp.MustCompile(`^/v2/(.+)/blobs/uploads/$`)
	sessionPath  = regexp.MustCompile(`^/v2/(.+)/blobs/uploads/([0-9]+)$`)
	manifestPath = regexp.MustCompile(`^/v2/(.+)/manifests/([A-Za-z0-9_.-]+)$`)
)

func (f *fakeRegistry) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := r.URL.Path
	switch m := []([]string){blobPath.FindStringSubmatch(p), uploadPath.FindStringSubmatch(p),
		sessionPath.FindStringSubmatch(p), manifestPath.FindStringSubmatch(p)}; {
	case r.Method == http.MethodHead && m[0] != nil:
		if !f.repos[m[0][1]][m[0][2]] {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		w.WriteHeader(http.StatusOK)
	case r.Method == http.MethodPost && m[1] != nil:
		if f.refuse != 0 {
			http.Error(w, `{"errors":[{"code":"UNSUPPORTED"}]}`, f.refuse)
			return
		}
		repo, q := m[1][1], r.URL.Query()
		if d := q.Get("mount"); d != "" && f.repos[q.Get("from")][d] {
			f.hold(repo, d)
			f.mounts++
			w.WriteHeader(http.StatusCreated)
			return
		}
		// A relative location, as registries with relativeurls send.
		w.Header().Set("Location", fmt.Sprintf("/v2/%s/blobs/uploads/%d?_state=x", repo, len(f.blobs)+f.mounts+1000))
		w.WriteHeader(http.StatusAccepted)
	case r.Method == http.MethodPut && m[2] != nil:
		d := r.URL.Query().Get("digest")
		data, _ := io.ReadAll(r.Body)
		sum := sha256.Sum256(data)
		if r.URL.Query().Get("_state") != "x" || d != "sha256:"+hex.EncodeToString(sum[:]) || int64(len(data)) != r.ContentLength {
			http.Error(w, `{"errors":[{"code":"DIGEST_INVALID"}]}`, http.StatusBadRequest)
			return
		}
		f.blobs[d] = data
		f.hold(m[2][1], d)
		f.uploads[d]++
		w.WriteHeader(http.StatusCreated)
	case r.Method == http.MethodPut && m[3] != nil:
		repo := m[3][1]
		data, _ := io.ReadAll(r.Body)
		var man ociManifest
		if r.Header.Get("Content-Type") != mediaTypeManifest || json.Unmarshal(data, &man) != nil {
			http.Error(w, `{"errors":[{"code":"MANIFEST_INVALID"}]}`, http.StatusBadRequest)
			return
		}
		for _, d := range append([]ociDescriptor{man.Config}, man.Layers...) {
			if !f.repos[repo][d.Digest] || int64(len(f.blobs[d.Digest])) != d.Size {
				http.Error(w, `{"errors":[{"code":"MANIFEST_BLOB_UNKNOWN"}]}`, http.StatusBadRequest)
				return
			}
		}
		if f.manifests[repo] == nil {
			f.manifests[repo] = map[string][]byte{}
		}
		f.manifests[repo][m[3][2]] = data
		w.WriteHeader(http.StatusCreated)
	default:
		http.Error(w, "unexpected "+r.Method+" "+p, http.StatusMethodNotAllowed)
	}
}

// hold records that repo holds the blob d.
func (f *fakeRegistry) hold(repo, d string) {
	if f.repos[repo] == nil {
		f.repos[repo] = map[string]bool{}
	}
	f.repos[repo][d] = true
}

// manifest returns the manifest repo:tag holds.
func (f *fakeRegistry) manifest(t *testing.T, repo, tag string) ociManifest {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	data, ok := f.manifests[repo][tag]
	if !ok {
		t.Fatalf("no manifest %s:%s (repositories: %v)", repo, tag, f.manifests)
	}
	var m ociManifest
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	return m
}
