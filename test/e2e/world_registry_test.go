package e2e

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

// The world's registry and proxy: one registry server, over TLS under a
// CA no node trusts by default, serving an image that exists nowhere else
// under two names. As registryHost it answers anyone: a pod of
// worldImage runs when additionalTrustBundle reaches the nodes'
// containerd and proxy.noProxy keeps that registry off the proxy (which
// refuses it). As mirrorHost it answers only connections from the proxy:
// a pod of mirroredImage runs when imageMirrors and proxy reach
// containerd too, since mirrorSource's name does not resolve (the mirror
// is the only way) and the mirror refuses the nodes' own connections.
const (
	// registryHost is the world's registry.
	registryHost = "registry.example.test"
	// mirrorSource is the registry mirroredImage names; no address has
	// this name.
	mirrorSource = "origin.example.test"
	// mirrorHost is the world's registry again, mirroring mirrorSource
	// for the proxy only.
	mirrorHost = "mirror.example.test"
	// proxyHost is the world's HTTP proxy, on proxyPort.
	proxyHost = "proxy.example.test"
	proxyPort = "3128"
	// imageRepo and imageTag are the registry's one image: the probe image
	// (probeImage).
	imageRepo, imageTag = "team/app", "v1"
	// worldImage is that image at registryHost, mirroredImage at
	// mirrorSource.
	worldImage    = registryHost + "/" + imageRepo + ":" + imageTag
	mirroredImage = mirrorSource + "/" + imageRepo + ":" + imageTag
	// worldRegistryEnv makes the test binary serve the registry and the
	// proxy on worldAddr: "<cert file>,<key file>,<docker-archive>".
	worldRegistryEnv = "KILN_E2E_WORLD_REGISTRY"
)

// worldNames are the world's DNS names with an address: every other name
// of worldZone does not exist.
func worldNames() []string {
	return []string{"web." + worldZone, registryHost + ".", mirrorHost + ".", proxyHost + "."}
}

// worldRegistry is what a world with a registry is given: the files of
// the registry's certificate and key (by the world CA), and the image
// archive whose one image it serves.
type worldRegistry struct {
	CAPEM                      []byte
	CertFile, KeyFile, Archive string
}

// newWorldRegistry makes a CA, the registry's certificate and the probe
// image's archive, in a directory removed after the test.
func newWorldRegistry(t *testing.T) worldRegistry {
	t.Helper()
	ca := newTestCA(t)
	cert, key := ca.issue(t, registryHost, nil, []string{registryHost, mirrorHost}, nil)
	dir := t.TempDir()
	r := worldRegistry{CAPEM: ca.certPEM, CertFile: filepath.Join(dir, "registry.crt"), KeyFile: filepath.Join(dir, "registry.key"), Archive: probeArchive(t)}
	for path, data := range map[string][]byte{r.CertFile: cert, r.KeyFile: key} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

// env is the value of worldRegistryEnv for this registry, empty for
// none.
func (r worldRegistry) env() string {
	if r.Archive == "" {
		return ""
	}
	return strings.Join([]string{r.CertFile, r.KeyFile, r.Archive}, ",")
}

// installConfig is what install-config.yaml adds for the nodes to pull
// worldImage and mirroredImage: the world CA, the mirror, and the proxy
// for all but registryHost.
func (r worldRegistry) installConfig(t *testing.T) []byte {
	t.Helper()
	out, err := yaml.Marshal(map[string]any{
		"additionalTrustBundle": string(r.CAPEM),
		"imageMirrors":          []map[string]any{{"source": mirrorSource, "mirrors": []string{mirrorHost}}},
		"proxy":                 map[string]string{"httpsProxy": "http://" + proxyHost + ":" + proxyPort, "noProxy": registryHost},
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// serveRegistry serves, on worldAddr, the registry (HTTPS, port 443) and
// the proxy (proxyPort) that worldRegistryEnv describes. It returns when
// one of them fails.
func serveRegistry(spec string) error {
	parts := strings.Split(spec, ",")
	if len(parts) != 3 {
		return fmt.Errorf("%s=%q: want <cert>,<key>,<archive>", worldRegistryEnv, spec)
	}
	reg, err := loadRegistryImage(parts[2])
	if err != nil {
		return err
	}
	errs := make(chan error, 2)
	go func() {
		errs <- http.ListenAndServeTLS(net.JoinHostPort(worldAddr, "443"), parts[0], parts[1], reg)
	}()
	go func() {
		errs <- http.ListenAndServe(net.JoinHostPort(worldAddr, proxyPort), http.HandlerFunc(serveConnect))
	}()
	return <-errs
}

// registryImage is one image served by the registry API (distribution's
// pull endpoints) as imageRepo:imageTag, an OCI manifest of uncompressed
// layers.
type registryImage struct {
	manifest       []byte
	manifestDigest string
	blobs          map[string][]byte // by digest: the config and the layers
}

// loadRegistryImage reads the one image of a docker-archive (nodeimage's
// writer: uncompressed layers, so a layer's digest is its diff ID).
func loadRegistryImage(archive string) (*registryImage, error) {
	f, err := os.Open(archive)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	files := map[string][]byte{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		if files[h.Name], err = io.ReadAll(tr); err != nil {
			return nil, err
		}
	}
	var items []struct {
		Config string
		Layers []string
	}
	if err := json.Unmarshal(files["manifest.json"], &items); err != nil || len(items) != 1 {
		return nil, fmt.Errorf("%s: want one image in manifest.json (%v)", archive, err)
	}
	img := &registryImage{blobs: map[string][]byte{}}
	desc := func(mediaType string, data []byte) map[string]any {
		sum := sha256.Sum256(data)
		d := "sha256:" + hex.EncodeToString(sum[:])
		img.blobs[d] = data
		return map[string]any{"mediaType": mediaType, "digest": d, "size": len(data)}
	}
	var layers []map[string]any
	for _, l := range items[0].Layers {
		layers = append(layers, desc("application/vnd.oci.image.layer.v1.tar", files[l]))
	}
	img.manifest, err = json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.manifest.v1+json",
		"config":        desc("application/vnd.oci.image.config.v1+json", files[items[0].Config]),
		"layers":        layers,
	})
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(img.manifest)
	img.manifestDigest = "sha256:" + hex.EncodeToString(sum[:])
	return img, nil
}

// ServeHTTP answers distribution's pull requests for the image: as
// mirrorHost only to the proxy (a connection from worldAddr itself), so a
// pull from the mirror that worked went through the proxy.
func (img *registryImage) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	host, _, err := net.SplitHostPort(r.Host)
	if err != nil {
		host = r.Host
	}
	if from, _, _ := net.SplitHostPort(r.RemoteAddr); host == mirrorHost && from != worldAddr {
		http.Error(w, "the mirror is reached only through "+proxyHost, http.StatusForbidden)
		return
	}
	prefix := "/v2/" + imageRepo + "/"
	switch p := r.URL.Path; {
	case p == "/v2/" || p == "/v2":
		w.Header().Set("Docker-Distribution-API-Version", "registry/2.0")
		io.WriteString(w, "{}")
	case p == prefix+"manifests/"+imageTag || p == prefix+"manifests/"+img.manifestDigest:
		w.Header().Set("Content-Type", "application/vnd.oci.image.manifest.v1+json")
		w.Header().Set("Docker-Content-Digest", img.manifestDigest)
		w.Header().Set("Content-Length", fmt.Sprint(len(img.manifest)))
		w.Write(img.manifest)
	case strings.HasPrefix(p, prefix+"blobs/") && img.blobs[strings.TrimPrefix(p, prefix+"blobs/")] != nil:
		d := strings.TrimPrefix(p, prefix+"blobs/")
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Docker-Content-Digest", d)
		w.Header().Set("Content-Length", fmt.Sprint(len(img.blobs[d])))
		w.Write(img.blobs[d])
	default:
		http.NotFound(w, r)
	}
}

// serveConnect is the world's proxy: CONNECT to mirrorHost:443 only,
// dialled from worldAddr (which the registry tells the proxy by).
func serveConnect(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodConnect || r.Host != mirrorHost+":443" {
		http.Error(w, "this proxy connects only to "+mirrorHost+":443", http.StatusForbidden)
		return
	}
	d := net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(worldAddr)}}
	upstream, err := d.Dial("tcp", net.JoinHostPort(worldAddr, "443"))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer upstream.Close()
	conn, buf, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return
	}
	defer conn.Close()
	io.WriteString(conn, "HTTP/1.1 200 Connection established\r\n\r\n")
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		io.Copy(upstream, buf.Reader) // what the client sent after CONNECT, buffered or not
		upstream.(*net.TCPConn).CloseWrite()
	}()
	io.Copy(conn, upstream)
	conn.(*net.TCPConn).CloseWrite()
	wg.Wait()
}
