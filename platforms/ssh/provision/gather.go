package provision

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	tfdata "github.com/kiln-project/kiln/data/terraform"
	"github.com/kiln-project/kiln/platforms"
	"github.com/kiln-project/kiln/platforms/ssh/remote"
	"github.com/kiln-project/kiln/platforms/terraform"
)

var _ platforms.Gatherer = (*Provisioner)(nil)

// Gather implements platforms.Gatherer: the diagnostics of the bootstrap
// host (while the bootstrap stage holds it) and the masters, read over
// SSH, one directory per host. The hosts and how to reach them are the
// stages' last variables in clusterDir, so gather works from what was
// provisioned, whatever install-config.yaml says now.
func (p *Provisioner) Gather(ctx context.Context, clusterDir, infraID, dir string) error {
	abs, err := filepath.Abs(clusterDir)
	if err != nil {
		return err
	}
	drv := terraform.NewDriver(terraform.DriverOptions{Dir: abs, Log: p.Env.Log})
	var hosts []tfdata.SSHHost
	var vars tfdata.SSHVars
	for _, stage := range []string{terraform.StageBootstrap, terraform.StageCluster} {
		var v tfdata.SSHVars
		err := drv.LastVars(stage, &v)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		vars = v
		if stage == terraform.StageBootstrap && v.Bootstrap != nil {
			hosts = append(hosts, *v.Bootstrap)
		}
		if stage == terraform.StageCluster {
			hosts = append(hosts, v.Masters...)
		}
	}
	if len(hosts) == 0 {
		return fmt.Errorf("no bootstrap host or master of %s was installed from %s", infraID, clusterDir)
	}
	client, err := remote.New(remoteConfigOf(vars))
	if err != nil {
		return err
	}
	addr := map[string]string{}
	for _, h := range hosts {
		addr[h.Name] = h.Address
	}
	run := hostRunner(client, addr)
	var errs []error
	for _, h := range hosts {
		end := p.Env.Progress.Start(fmt.Sprintf("Gathering logs from %s (%s)", h.Name, h.Address))
		err := platforms.GatherMachine(ctx, run, h.Name, filepath.Join(dir, h.Name))
		end(err)
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// remoteConfigOf is how the stages' variables v reach the hosts.
func remoteConfigOf(v tfdata.SSHVars) remote.Config {
	c := remote.Config{User: v.SSHUser, KnownHostsFile: v.SSHKnownHostsFile}
	if v.SSHPort != nil {
		c.Port = *v.SSHPort
	}
	if v.SSHIdentityFile != nil {
		c.IdentityFile = *v.SSHIdentityFile
	}
	if v.SSHBastion != nil {
		c.Bastion = *v.SSHBastion
	}
	return c
}
