package kubectl

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"time"

	"github.com/kiln-project/kiln/assets/release"
)

// MaxMinorSkew is how many minor versions kubectl may be older or newer
// than the API server under the Kubernetes version skew policy.
const MaxMinorSkew = 1

// versionTimeout bounds `kubectl version --client`.
const versionTimeout = 5 * time.Second

// WithinSkew reports whether a kubectl at client is supported against an
// API server at server: the same major version and minors at most
// MaxMinorSkew apart. Versions are Kubernetes git versions, such as v1.36.3
// or v1.32.4-dispatcher.
func WithinSkew(client, server string) (bool, error) {
	c, err := release.ParseVersion(client)
	if err != nil {
		return false, fmt.Errorf("kubectl version: %w", err)
	}
	s, err := release.ParseVersion(server)
	if err != nil {
		return false, fmt.Errorf("server version: %w", err)
	}
	if c.Major != s.Major {
		return false, nil
	}
	return max(c.Minor, s.Minor)-min(c.Minor, s.Minor) <= MaxMinorSkew, nil
}

// versionArgv asks the kubectl at bin for its own version only (no
// cluster is contacted), as JSON.
func versionArgv(bin string) []string {
	return []string{bin, "version", "--client", "--output", "json"}
}

// parseClientVersion reads the git version out of `kubectl version
// --client --output json`.
func parseClientVersion(out []byte) (string, error) {
	var v struct {
		ClientVersion struct {
			GitVersion string `json:"gitVersion"`
		} `json:"clientVersion"`
	}
	if err := json.Unmarshal(out, &v); err != nil {
		return "", err
	}
	if v.ClientVersion.GitVersion == "" {
		return "", fmt.Errorf("no clientVersion.gitVersion in %q", out)
	}
	return v.ClientVersion.GitVersion, nil
}

// ClientVersion returns the version of the kubectl at bin.
func ClientVersion(ctx context.Context, bin string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, versionTimeout)
	defer cancel()
	argv := versionArgv(bin)
	out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).Output()
	if err != nil {
		return "", fmt.Errorf("%s version: %w", bin, err)
	}
	return parseClientVersion(out)
}

// SkewNote is what `kiln create cluster` tells the user about the kubectl
// on PATH (found with lookPath) against a cluster at server whose
// --dir is dir: "" when it is within the skew policy, when there is none,
// or when its version cannot be told; else a note that names it and
// suggests `kiln kubectl`.
func SkewNote(ctx context.Context, lookPath func(string) (string, error), server, dir string) string {
	bin, err := lookPath("kubectl")
	if err != nil {
		return ""
	}
	client, err := ClientVersion(ctx, bin)
	if err != nil {
		return ""
	}
	if ok, err := WithinSkew(client, server); ok || err != nil {
		return ""
	}
	return fmt.Sprintf("The kubectl on your PATH (%s, %s) is outside the version skew policy of the cluster's Kubernetes %s "+
		"(kubectl is supported within %d minor version of the API server): use the release's own with `kiln kubectl --dir %s -- get nodes`",
		bin, client, server, MaxMinorSkew, dir)
}
