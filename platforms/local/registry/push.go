package registry

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// Pusher uploads images to a registry over the OCI distribution API,
// without TLS or credentials: the registry is the cluster's, on this
// host's loopback.
type Pusher struct {
	// Addr is the registry's host:port, such as 127.0.0.1:5001.
	Addr string
	// Names says which references belong in it, and under what name.
	Names Names
	// Client does the requests; http.DefaultClient when nil.
	Client *http.Client
}

// Result is what Push did with an archive.
type Result struct {
	// Pushed are the references stored, as the nodes name them.
	Pushed []string
	// Skipped are the references of registries the nodes never look up
	// in the cluster's registry.
	Skipped []string
}

// Push copies every image of the docker-archive at path whose reference
// belongs in the registry (Names). Blobs the repository has already are
// not sent again, and a blob sent to one repository of the archive is
// mounted into the others, so a base layer shared by many images is
// uploaded once. An archive without manifest.json returns
// ErrNotDockerArchive.
func (p *Pusher) Push(ctx context.Context, path string) (Result, error) {
	a, err := openArchive(path)
	if err != nil {
		return Result{}, err
	}
	defer a.Close()
	images, err := a.images()
	if err != nil {
		return Result{}, fmt.Errorf("%s: %w", path, err)
	}
	var res Result
	s := session{p: p, stored: map[string]string{}}
	for _, img := range images {
		for _, ref := range img.Refs {
			repo, tag, ok, err := p.Names.destination(ref)
			if err != nil {
				return res, err
			}
			if !ok {
				res.Skipped = append(res.Skipped, ref)
				continue
			}
			if err := s.pushImage(ctx, repo, tag, img); err != nil {
				return res, fmt.Errorf("pushing %s: %w", ref, err)
			}
			res.Pushed = append(res.Pushed, ref)
		}
	}
	return res, nil
}

// session is one Push: it remembers which repository holds each blob it
// stored.
type session struct {
	p      *Pusher
	stored map[string]string // digest -> repository
}

// ociManifest is an OCI image manifest.
type ociManifest struct {
	SchemaVersion int             `json:"schemaVersion"`
	MediaType     string          `json:"mediaType"`
	Config        ociDescriptor   `json:"config"`
	Layers        []ociDescriptor `json:"layers"`
}

// ociDescriptor points at a blob.
type ociDescriptor struct {
	MediaType string `json:"mediaType"`
	Digest    string `json:"digest"`
	Size      int64  `json:"size"`
}

func descriptor(b blob) ociDescriptor {
	return ociDescriptor{MediaType: b.MediaType, Digest: b.Digest, Size: b.Size}
}

// pushImage stores img's blobs in repo, then its manifest under tag.
func (s *session) pushImage(ctx context.Context, repo, tag string, img image) error {
	m := ociManifest{SchemaVersion: 2, MediaType: mediaTypeManifest, Config: descriptor(img.Config)}
	for _, b := range append([]blob{img.Config}, img.Layers...) {
		if err := s.pushBlob(ctx, repo, b); err != nil {
			return err
		}
	}
	for _, l := range img.Layers {
		m.Layers = append(m.Layers, descriptor(l))
	}
	data, err := json.Marshal(m)
	if err != nil {
		return err
	}
	resp, err := s.do(ctx, http.MethodPut, s.url("/v2/"+repo+"/manifests/"+tag), mediaTypeManifest, bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return err
	}
	return expect(resp, http.StatusCreated)
}

// pushBlob stores b in repo unless it is there: mounted from a repository
// this session stored it in, else uploaded in one PUT.
func (s *session) pushBlob(ctx context.Context, repo string, b blob) error {
	resp, err := s.do(ctx, http.MethodHead, s.url("/v2/"+repo+"/blobs/"+b.Digest), "", nil, 0)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		return nil
	}
	start := s.url("/v2/" + repo + "/blobs/uploads/")
	if from, ok := s.stored[b.Digest]; ok {
		start += "?" + url.Values{"mount": {b.Digest}, "from": {from}}.Encode()
	}
	resp, err = s.do(ctx, http.MethodPost, start, "", nil, 0)
	if err != nil {
		return err
	}
	if resp.StatusCode == http.StatusCreated { // mounted
		resp.Body.Close()
		return nil
	}
	loc := resp.Header.Get("Location")
	if err := expect(resp, http.StatusAccepted); err != nil {
		return err
	}
	put, err := s.uploadURL(loc, b.Digest)
	if err != nil {
		return err
	}
	resp, err = s.do(ctx, http.MethodPut, put, "application/octet-stream", b.open(), b.Size)
	if err != nil {
		return err
	}
	if err := expect(resp, http.StatusCreated); err != nil {
		return fmt.Errorf("blob %s: %w", b.Digest, err)
	}
	s.stored[b.Digest] = repo
	return nil
}

// url is the registry's URL of path.
func (s *session) url(path string) string { return "http://" + s.p.Addr + path }

// uploadURL returns the upload location loc (absolute or relative to the
// registry) with the digest that completes it.
func (s *session) uploadURL(loc, digest string) (string, error) {
	if loc == "" {
		return "", errors.New("the registry started an upload without a Location")
	}
	base, err := url.Parse(s.url("/"))
	if err != nil {
		return "", err
	}
	u, err := base.Parse(loc)
	if err != nil {
		return "", fmt.Errorf("upload location %q: %w", loc, err)
	}
	q := u.Query()
	q.Set("digest", digest)
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// do sends one request; body may be nil.
func (s *session) do(ctx context.Context, method, u, contentType string, body io.Reader, size int64) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.ContentLength = size
		req.Header.Set("Content-Type", contentType)
	}
	c := s.p.Client
	if c == nil {
		c = http.DefaultClient
	}
	return c.Do(req)
}

// StatusError is a registry's answer other than the one expected.
type StatusError struct {
	Method, URL string
	Status      int
	// Body is the start of the answer: the registry's error codes.
	Body string
}

// Error names the request and the answer.
func (e *StatusError) Error() string {
	return fmt.Sprintf("%s %s: %d %s: %s", e.Method, e.URL, e.Status, http.StatusText(e.Status), e.Body)
}

// expect closes resp and returns a *StatusError unless its status is want.
func expect(resp *http.Response, want int) error {
	defer resp.Body.Close()
	if resp.StatusCode == want {
		return nil
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	u := *resp.Request.URL
	u.RawQuery = ""
	return &StatusError{Method: resp.Request.Method, URL: u.String(), Status: resp.StatusCode, Body: strings.TrimSpace(string(body))}
}
