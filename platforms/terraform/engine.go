package terraform

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
)

// Engine names: the binary names kiln looks for and builds.
const (
	// OpenTofu is the OpenTofu engine's binary name.
	OpenTofu = "tofu"
	// Terraform is HashiCorp Terraform's binary name.
	Terraform = "terraform"
)

// minVersions is the oldest release of each engine kiln accepts: OpenTofu 1.6
// (its first stable release) and Terraform 1.5 (variable validation, check
// blocks and the provider protocol 6 features the local provider uses).
var minVersions = map[string][3]int{
	OpenTofu:  {1, 6, 0},
	Terraform: {1, 5, 0},
}

// Engine is a Terraform-compatible binary kiln runs.
type Engine struct {
	// Name is OpenTofu or Terraform.
	Name string
	// Path is the absolute path of the binary.
	Path string
	// Version is the engine's version without a leading "v", e.g. "1.12.6".
	Version string
}

// String returns e.g. "tofu 1.12.6 (/usr/bin/tofu)".
func (e *Engine) String() string {
	return fmt.Sprintf("%s %s (%s)", e.Name, e.Version, e.Path)
}

// ErrVersion marks an engine whose version is too old or unreadable.
var ErrVersion = errors.New("unsupported engine version")

// versionOutput is the part of `<engine> version -json` kiln reads; OpenTofu
// uses Terraform's key.
type versionOutput struct {
	Version string `json:"terraform_version"`
}

// ProbeEngine runs `<path> version -json` and returns the engine when its
// version fits; name is OpenTofu or Terraform. An engine that is too old
// yields an error wrapping ErrVersion.
func ProbeEngine(ctx context.Context, name, path string) (*Engine, error) {
	cmd := exec.CommandContext(ctx, path, "version", "-json")
	cmd.Env = engineEnvList(os.Environ(), os.DevNull)
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s version -json: %w", path, err)
	}
	v, err := parseVersionOutput(out)
	if err != nil {
		return nil, fmt.Errorf("%s version -json: %w", path, err)
	}
	if err := checkVersion(name, v); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &Engine{Name: name, Path: path, Version: v}, nil
}

// parseVersionOutput extracts the version from `version -json` output.
func parseVersionOutput(out []byte) (string, error) {
	var vo versionOutput
	if err := json.Unmarshal(out, &vo); err != nil {
		return "", fmt.Errorf("%w: %v", ErrVersion, err)
	}
	if vo.Version == "" {
		return "", fmt.Errorf("%w: no terraform_version in output", ErrVersion)
	}
	return strings.TrimPrefix(vo.Version, "v"), nil
}

// checkVersion returns an ErrVersion error unless version is a release of
// engine name at least as new as its minimum. Pre-releases are refused.
func checkVersion(name, version string) error {
	min, ok := minVersions[name]
	if !ok {
		return fmt.Errorf("%w: unknown engine %q", ErrVersion, name)
	}
	got, err := parseSemver(version)
	if err != nil {
		return err
	}
	for i := range got {
		if got[i] != min[i] {
			if got[i] < min[i] {
				return fmt.Errorf("%w: %s %s is older than %d.%d.%d", ErrVersion, name, version, min[0], min[1], min[2])
			}
			return nil
		}
	}
	return nil
}

// parseSemver parses "MAJOR.MINOR.PATCH"; anything else, pre-releases
// included, is an ErrVersion error.
func parseSemver(v string) ([3]int, error) {
	var out [3]int
	parts := strings.Split(v, ".")
	if len(parts) != 3 {
		return out, fmt.Errorf("%w: %q is not MAJOR.MINOR.PATCH", ErrVersion, v)
	}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return out, fmt.Errorf("%w: %q is not MAJOR.MINOR.PATCH", ErrVersion, v)
		}
		out[i] = n
	}
	return out, nil
}
