package ignition

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	butanecommon "github.com/coreos/butane/config/common"
	butanefcos "github.com/coreos/butane/config/fcos/v1_4"
	"github.com/coreos/ignition/v2/config/v3_3"
	"github.com/coreos/ignition/v2/config/v3_3/types"
	"github.com/vincent-petithory/dataurl"
)

// SpecVersion is the Ignition config spec version of every config kiln emits.
const SpecVersion = "3.3.0"

// compressAbove is the size from which file contents are gzip-compressed.
const compressAbove = 4096

// New returns an empty config at SpecVersion.
func New() types.Config {
	return types.Config{Ignition: types.Ignition{Version: SpecVersion}}
}

// FromButane translates a Butane config (variant fcos, version 1.4.0) into an
// Ignition config. Warnings are errors: data/ must translate cleanly.
func FromButane(name string, src []byte) (types.Config, error) {
	raw, rpt, err := butanefcos.ToIgn3_3Bytes(src, butanecommon.TranslateBytesOptions{})
	if err != nil {
		return types.Config{}, fmt.Errorf("butane %s: %w: %s", name, err, rpt.String())
	}
	if len(rpt.Entries) > 0 {
		return types.Config{}, fmt.Errorf("butane %s: %s", name, rpt.String())
	}
	// Butane validated the config it translated, and Marshal validates the
	// whole config this part goes into: decoding is enough here.
	var cfg types.Config
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return types.Config{}, fmt.Errorf("butane %s: translated config: %w", name, err)
	}
	return cfg, nil
}

// Merge returns parent with child merged over it, with Ignition's own
// merge semantics.
func Merge(parent, child types.Config) types.Config {
	return v3_3.Merge(parent, child)
}

// AddFile adds (or replaces) a file owned by root with the given content.
// Large contents are stored gzip-compressed.
func AddFile(c *types.Config, path string, mode int, data []byte) {
	src, compression := encode(data)
	f := types.File{
		Node: types.Node{Path: path, Overwrite: boolPtr(true)},
		FileEmbedded1: types.FileEmbedded1{
			Mode: &mode,
			Contents: types.Resource{
				Source:      &src,
				Compression: compression,
			},
		},
	}
	for i := range c.Storage.Files {
		if c.Storage.Files[i].Path == path {
			c.Storage.Files[i] = f
			return
		}
	}
	c.Storage.Files = append(c.Storage.Files, f)
}

// Pointer returns a config that merges the config at url, trusting caPEM
// for its TLS connection: what master.ign and worker.ign are.
func Pointer(url string, caPEM []byte, headers ...types.HTTPHeader) types.Config {
	c := New()
	ca, _ := encode(caPEM)
	c.Ignition.Config.Merge = []types.Resource{{Source: &url, HTTPHeaders: headers}}
	c.Ignition.Security.TLS.CertificateAuthorities = []types.Resource{{Source: &ca}}
	return c
}

// Sort orders files, directories, links and units by path or name so that
// the same inputs always marshal to the same bytes.
func Sort(c *types.Config) {
	sort.SliceStable(c.Storage.Files, func(i, j int) bool { return c.Storage.Files[i].Path < c.Storage.Files[j].Path })
	sort.SliceStable(c.Storage.Directories, func(i, j int) bool {
		return c.Storage.Directories[i].Path < c.Storage.Directories[j].Path
	})
	sort.SliceStable(c.Storage.Links, func(i, j int) bool { return c.Storage.Links[i].Path < c.Storage.Links[j].Path })
	sort.SliceStable(c.Systemd.Units, func(i, j int) bool { return c.Systemd.Units[i].Name < c.Systemd.Units[j].Name })
}

// Marshal sorts and serialises c and checks the result with Ignition's own
// validator; a config with any error is refused.
func Marshal(c types.Config) ([]byte, error) {
	Sort(&c)
	raw, err := json.Marshal(c)
	if err != nil {
		return nil, err
	}
	if err := Validate(raw); err != nil {
		return nil, err
	}
	return raw, nil
}

// Parse parses and validates raw as a spec 3.3.0 config.
func Parse(raw []byte) (types.Config, error) {
	c, rpt, err := v3_3.Parse(raw)
	if err != nil {
		return types.Config{}, fmt.Errorf("%w: %v: %s", ErrInvalid, err, strings.TrimSpace(rpt.String()))
	}
	return c, nil
}

// ErrInvalid is returned (wrapped) for a config that fails validation.
var ErrInvalid = errors.New("invalid Ignition config")

// Validate parses raw as a spec 3.3.0 config and runs Ignition's validator
// over it (v3_3.Parse runs validate.ValidateWithContext, as Ignition does
// on the machine); warnings are tolerated, errors are not.
func Validate(raw []byte) error {
	_, err := Parse(raw)
	return err
}

// FileContents returns the decoded contents of the file at path in c, for
// tests and for the machine-config server.
func FileContents(c types.Config, path string) ([]byte, bool, error) {
	for _, f := range c.Storage.Files {
		if f.Path != path || f.Contents.Source == nil {
			continue
		}
		u, err := dataurl.DecodeString(*f.Contents.Source)
		if err != nil {
			return nil, true, fmt.Errorf("%s: %w", path, err)
		}
		if f.Contents.Compression != nil && *f.Contents.Compression == "gzip" {
			zr, err := gzip.NewReader(bytes.NewReader(u.Data))
			if err != nil {
				return nil, true, fmt.Errorf("%s: %w", path, err)
			}
			var out bytes.Buffer
			if _, err := out.ReadFrom(zr); err != nil {
				return nil, true, fmt.Errorf("%s: %w", path, err)
			}
			return out.Bytes(), true, nil
		}
		return u.Data, true, nil
	}
	return nil, false, nil
}

func encode(data []byte) (string, *string) {
	if len(data) > compressAbove {
		var buf bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		_, _ = zw.Write(data)
		_ = zw.Close()
		gz := "gzip"
		return dataurl.New(buf.Bytes(), "application/octet-stream").String(), &gz
	}
	return dataurl.New(data, "text/plain").String(), nil
}

func boolPtr(b bool) *bool { return &b }
