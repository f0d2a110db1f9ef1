package registry

import (
	"bytes"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"

	"go.yaml.in/yaml/v3"

	"github.com/kiln-project/kiln/graph/atomicfile"
)

// Files of the registry in the cluster's load balancer directory.
const (
	// ConfigFile is distribution's configuration.
	ConfigFile = "registry.yml"
	// StorageDir holds the blobs and repositories: kept while the cluster
	// is stopped, removed by Remove when it is destroyed.
	StorageDir = "registry"
	pidFile    = "registry.pid"
	logFile    = "registry.log"
)

// PushHost is the address the registry accepts pushes on, at its port.
// Its bridge address serves pulls only.
const PushHost = "127.0.0.1"

// config is the part of distribution's configuration (version 0.1) kiln
// writes; distribution's defaults hold for the rest (no authentication,
// deletes refused, unfinished uploads purged after a week).
type config struct {
	Version string    `yaml:"version"`
	Log     logConfig `yaml:"log"`
	Storage struct {
		Filesystem struct {
			RootDirectory string `yaml:"rootdirectory"`
		} `yaml:"filesystem"`
	} `yaml:"storage"`
	HTTP struct {
		// Addr is the bridge address; kiln's build also listens on
		// PushHost at its port.
		Addr string `yaml:"addr"`
	} `yaml:"http"`
}

type logConfig struct {
	Level string `yaml:"level"`
}

// configYAML returns the configuration of a registry at addr (the host's
// bridge address and the port) with its storage in dir.
func configYAML(addr netip.AddrPort, dir string) ([]byte, error) {
	var c config
	c.Version = "0.1"
	c.Log.Level = "info"
	c.Storage.Filesystem.RootDirectory = filepath.Join(dir, StorageDir)
	c.HTTP.Addr = addr.String()
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(&c); err != nil {
		return nil, err
	}
	return b.Bytes(), enc.Close()
}

// WriteConfig writes the configuration of the cluster's registry into dir
// (the cluster's load balancer directory) and creates its storage.
func WriteConfig(dir string, addr netip.AddrPort) error {
	if !addr.IsValid() || addr.Port() == 0 {
		return fmt.Errorf("registry address %s: want the bridge address and a port", addr)
	}
	if err := os.MkdirAll(filepath.Join(dir, StorageDir), 0o700); err != nil {
		return err
	}
	data, err := configYAML(addr, dir)
	if err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(dir, ConfigFile), data, 0o600)
}

// ReadAddr returns the bridge address and port of the registry whose
// configuration is in dir.
func ReadAddr(dir string) (netip.AddrPort, error) {
	data, err := os.ReadFile(filepath.Join(dir, ConfigFile))
	if err != nil {
		return netip.AddrPort{}, err
	}
	var c config
	if err := yaml.Unmarshal(data, &c); err != nil {
		return netip.AddrPort{}, fmt.Errorf("%s: %w", filepath.Join(dir, ConfigFile), err)
	}
	addr, err := netip.ParseAddrPort(c.HTTP.Addr)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("%s: http.addr: %w", filepath.Join(dir, ConfigFile), err)
	}
	return addr, nil
}

// PushAddr is where the host pushes to the registry at addr: PushHost at
// its port.
func PushAddr(addr netip.AddrPort) string {
	return PushHost + ":" + strconv.Itoa(int(addr.Port()))
}
