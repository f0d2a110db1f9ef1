package servicelb

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/sirupsen/logrus"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kiln-project/kiln/graph/atomicfile"
	"github.com/kiln-project/kiln/platforms/lb"
	"github.com/kiln-project/kiln/platforms/netroute"
)

// Files of the process in the cluster's load balancer directory.
const (
	ConfigFile     = "service-lb.json"
	KubeconfigFile = "service-lb.kubeconfig"
	pidFile        = "service-lb.pid"
	logFile        = "service-lb.log"
)

// Config is the JSON configuration of `kiln service-lb`.
type Config struct {
	// Kubeconfig is the cluster's admin kubeconfig (a 0600 copy).
	Kubeconfig string `json:"kubeconfig"`
	// Bridge is the cluster's host bridge, which gets the addresses.
	Bridge string `json:"bridge"`
	// Pool is the range the addresses come from.
	Pool Pool `json:"pool"`
	// Machines are the addresses kiln assigned to the machines: the only
	// backends. kiln rewrites them when it changes the machines, and the
	// running controller reads them again.
	Machines Machines `json:"machines"`
}

// Validate returns every problem of c.
func (c *Config) Validate() error {
	var errs []error
	if c.Kubeconfig == "" {
		errs = append(errs, errors.New("kubeconfig: required"))
	}
	if c.Bridge == "" {
		errs = append(errs, errors.New("bridge: required"))
	}
	if err := c.Pool.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("pool: %w", err))
	}
	if err := c.Machines.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("machines: %w", err))
	}
	return errors.Join(errs...)
}

// Process returns the detached `kiln service-lb` process whose files are
// in dir (the cluster's directory of load balancer files).
func Process(kiln, dir string) lb.Process {
	return lb.Process{
		Kiln:       kiln,
		Subcommand: []string{"service-lb"},
		ConfigPath: filepath.Join(dir, ConfigFile),
		PIDFile:    filepath.Join(dir, pidFile),
		LogFile:    filepath.Join(dir, logFile),
	}
}

// WriteFiles writes the process's configuration into dir: c with its
// kubeconfig pointing at a 0600 copy of the admin kubeconfig.
func WriteFiles(dir string, c Config, kubeconfig []byte) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	c.Kubeconfig = filepath.Join(dir, KubeconfigFile)
	if err := c.Validate(); err != nil {
		return err
	}
	if err := atomicfile.Write(c.Kubeconfig, kubeconfig, 0o600); err != nil {
		return err
	}
	data, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(dir, ConfigFile), append(data, '\n'), 0o600)
}

// LoadConfig reads and validates the configuration file at path, as
// WriteFiles wrote it.
func LoadConfig(path string) (Config, error) {
	var cfg Config
	data, err := os.ReadFile(path)
	if err != nil {
		return cfg, err
	}
	if err := json.Unmarshal(data, &cfg); err != nil {
		return cfg, fmt.Errorf("%s: %w", path, err)
	}
	if err := cfg.Validate(); err != nil {
		return cfg, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, nil
}

// ServeOptions configures Serve.
type ServeOptions struct {
	// ConfigPath is the JSON configuration file.
	ConfigPath string
	// PIDFile, when set, receives the process id once the controller is
	// set up; it is removed when Serve returns.
	PIDFile string
	// Run runs `ip`; machine.ExecRunner in the kiln binary.
	Run Runner
	// Log receives the controller's log.
	Log logrus.FieldLogger
}

// Serve runs the controller of `kiln service-lb` until ctx is done or
// SIGTERM arrives; it then removes the addresses it added.
func Serve(ctx context.Context, o ServeOptions) error {
	cfg, err := LoadConfig(o.ConfigPath)
	if err != nil {
		return err
	}
	rest, err := clientcmd.BuildConfigFromFlags("", cfg.Kubeconfig)
	if err != nil {
		return err
	}
	// The API (the VIP on the bridge) only through the bridge: once the
	// bridge is gone, the watch's reconnects send nothing elsewhere.
	rest.Dial = netroute.Dialer{Policy: netroute.Through{Interface: cfg.Bridge}}.DialContext
	client, err := kubernetes.NewForConfig(rest)
	if err != nil {
		return err
	}
	ctx, cancel := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer cancel()
	if o.PIDFile != "" {
		if err := atomicfile.Write(o.PIDFile, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
			return err
		}
		defer os.Remove(o.PIDFile)
	}
	machines := &machineFile{path: o.ConfigPath}
	c := &Controller{
		Client:   client,
		Addrs:    BridgeAddresses{Run: o.Run, Bridge: cfg.Bridge},
		Pool:     cfg.Pool,
		Machines: machines.Machines,
		Log:      o.Log,
	}
	return c.Run(ctx)
}
