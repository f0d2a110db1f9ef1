package lb

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/kiln-project/kiln/graph/atomicfile"
)

// Timing of Serve.
const (
	// configPoll is how often Serve looks for a changed config file.
	configPoll = 2 * time.Second
	// stopGrace is how long open connections may finish after SIGTERM.
	stopGrace = 5 * time.Second
)

// ServeOptions configures Serve.
type ServeOptions struct {
	// ConfigPath is the JSON configuration file.
	ConfigPath string
	// PIDFile, when set, receives the process id once every service
	// listens; it is removed when Serve returns.
	PIDFile string
	// Log receives the balancer's log.
	Log logrus.FieldLogger
}

// Serve runs the load balancer of `kiln lb` until ctx is done or SIGTERM
// arrives, then stops gracefully. It reloads the configuration on SIGHUP and
// when the file's modification time or size changes; a reload that fails
// keeps the running configuration.
func Serve(ctx context.Context, o ServeOptions) error {
	cfg, err := LoadConfig(o.ConfigPath)
	if err != nil {
		return err
	}
	b := New(o.Log)
	if err := b.Apply(cfg); err != nil {
		b.Shutdown(context.Background())
		return err
	}
	if o.PIDFile != "" {
		if err := writePIDFile(o.PIDFile, os.Getpid()); err != nil {
			b.Shutdown(context.Background())
			return err
		}
		defer os.Remove(o.PIDFile)
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGHUP, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)
	stamp := fileStamp(o.ConfigPath)
	tick := time.NewTicker(configPoll)
	defer tick.Stop()
	// The health status file, beside the configuration, for the waits: a
	// stopped balancer leaves none.
	status := &statusWriter{path: StatusPath(o.ConfigPath)}
	defer os.Remove(status.path)
	for {
		if err := status.write(b.Status()); err != nil {
			o.Log.Debug(err)
		}
		reload := false
		select {
		case <-ctx.Done():
			return stop(b, o.Log)
		case s := <-sigs:
			if s != syscall.SIGHUP {
				return stop(b, o.Log)
			}
			reload = true
		case <-tick.C:
			if st := fileStamp(o.ConfigPath); st != stamp {
				stamp, reload = st, true
			}
		}
		if reload {
			o.Log.Infof("Reloading %s", o.ConfigPath)
			cfg, err := LoadConfig(o.ConfigPath)
			if err == nil {
				err = b.Apply(cfg)
			}
			if err != nil {
				o.Log.Errorf("Reload failed, keeping the running configuration: %v", err)
			}
		}
	}
}

// stop shuts b down with stopGrace for open connections.
func stop(b *Balancer, log logrus.FieldLogger) error {
	log.Info("Stopping")
	ctx, cancel := context.WithTimeout(context.Background(), stopGrace)
	defer cancel()
	b.Shutdown(ctx)
	return nil
}

// fileStamp identifies a version of a file by modification time and size.
func fileStamp(path string) string {
	st, err := os.Stat(path)
	if err != nil {
		return ""
	}
	return fmt.Sprintf("%d/%d", st.ModTime().UnixNano(), st.Size())
}

// writePIDFile writes pid to path atomically.
func writePIDFile(path string, pid int) error {
	return atomicfile.Write(path, []byte(strconv.Itoa(pid)+"\n"), 0o644)
}
