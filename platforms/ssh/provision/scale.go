package provision

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"slices"

	"github.com/kiln-project/kiln/assets/installconfig/types/machines"
	"github.com/kiln-project/kiln/assets/installconfig/types/ssh"
	"github.com/kiln-project/kiln/assets/installconfig/types/ssh/sshconfig"
	tfdata "github.com/kiln-project/kiln/data/terraform"
	"github.com/kiln-project/kiln/platforms"
	"github.com/kiln-project/kiln/platforms/lb"
	"github.com/kiln-project/kiln/platforms/terraform"
)

var _ platforms.Scaler = (*Provisioner)(nil)

// ApplyMachines implements platforms.Scaler: the cluster stage applied
// with exactly the hosts of c.Shape. A host it no longer lists is reset; a
// host added is installed from c.Full's config of its role when there is
// one (a day-2 join: the full config with the host's own join token),
// with the node payload of its release (hostPayloads) and the API proxy
// configuration the other hosts have (APIBackends). The hosts that run
// keep theirs: the stage ignores a change of ignition and api_proxy.
func (p *Provisioner) ApplyMachines(ctx context.Context, c *platforms.Cluster) error {
	drv, prev, err := p.clusterStage(ctx, c)
	if err != nil {
		return err
	}
	backends, err := apiBackends(c, prev)
	if err != nil {
		return err
	}
	proxy, err := proxyConfig(hostAddresses(c, backends))
	if err != nil {
		return err
	}
	vars, err := Vars(c, prev.Payload)
	if err != nil {
		return err
	}
	if err := p.hostPayloads(ctx, c, &prev, &vars); err != nil {
		return err
	}
	vars.APIProxy = &proxy
	if full := c.Full[machines.RoleMaster]; full != nil {
		vars.MasterIgnition = string(full)
	}
	if full := c.Full[machines.RoleWorker]; full != nil {
		vars.WorkerIgnition = string(full)
	}
	shape := c.Machines()
	end := p.Env.Progress.Start(fmt.Sprintf("Applying the hosts: masters %s; workers %s", platforms.NameList(shape.Masters), platforms.NameList(shape.Workers)))
	err = drv.Apply(ctx, terraform.StageCluster, vars)
	end(err)
	return err
}

// SetAPIBackends implements platforms.Scaler: every host of the cluster
// stage gets the proxy configuration with exactly masters as the API and
// machine-config servers, and the stage's variables record it (the hosts
// added later get it; the stage changes no host for it). A master leaving
// (one the stage has that masters does not name) may not answer: it is
// about to be reset, so failing to reach it is only a warning.
func (p *Provisioner) SetAPIBackends(ctx context.Context, c *platforms.Cluster, masters []string) error {
	drv, prev, err := p.clusterStage(ctx, c)
	if err != nil {
		return err
	}
	addrs := hostAddresses(c, masters)
	if len(addrs) != len(masters) {
		return fmt.Errorf("API backends %s: not all are hosts of platform.ssh.hosts", platforms.NameList(masters))
	}
	proxy, err := proxyConfig(addrs)
	if err != nil {
		return err
	}
	client, err := newClient(c.Config.Platform.SSH)
	if err != nil {
		return err
	}
	var leaving []string
	for _, m := range prev.Masters {
		if !slices.Contains(masters, m.Name) {
			leaving = append(leaving, m.Name)
		}
	}
	hosts := slices.Concat(prev.Masters, prev.Workers)
	end := p.Env.Progress.Start(fmt.Sprintf("Setting %d hosts' API proxies to %s", len(hosts), platforms.NameList(masters)))
	if err = p.setProxies(ctx, client, hosts, leaving, proxy); err == nil {
		prev.APIProxy = &proxy
		err = drv.Apply(ctx, terraform.StageCluster, prev)
	}
	end(err)
	return err
}

// APIBackends implements platforms.Scaler: the masters the hosts' API
// proxies were last configured with.
func (p *Provisioner) APIBackends(ctx context.Context, c *platforms.Cluster) ([]string, error) {
	_, prev, err := p.clusterStage(ctx, c)
	if err != nil {
		return nil, err
	}
	return apiBackends(c, prev)
}

// clusterStage returns the Terraform driver of c and the variables its
// cluster stage was last applied with.
func (p *Provisioner) clusterStage(ctx context.Context, c *platforms.Cluster) (*terraform.Driver, tfdata.SSHVars, error) {
	var prev tfdata.SSHVars
	drv, err := p.driver(ctx, c.Dir)
	if err != nil {
		return nil, prev, err
	}
	if err := drv.LastVars(terraform.StageCluster, &prev); err != nil {
		return nil, prev, fmt.Errorf("no cluster was provisioned from %s: %w", c.Dir, err)
	}
	return drv, prev, nil
}

// apiBackends returns the masters of c (by name) among the API backends
// of the proxy configuration in vars, in its order. A backend that is no
// master's (the bootstrap host, when the stage was last applied before
// bootstrap-complete) is left out.
func apiBackends(c *platforms.Cluster, vars tfdata.SSHVars) ([]string, error) {
	if vars.APIProxy == nil {
		return nil, errors.New("the cluster stage's variables have no API proxy configuration")
	}
	var cfg lb.Config
	if err := json.Unmarshal([]byte(*vars.APIProxy), &cfg); err != nil {
		return nil, fmt.Errorf("the hosts' API proxy configuration: %w", err)
	}
	i := slices.IndexFunc(cfg.Services, func(s lb.Service) bool { return s.Port == ssh.APIProxyPort })
	if i < 0 {
		return nil, fmt.Errorf("the hosts' API proxy configuration has no service on port %d", ssh.APIProxyPort)
	}
	masters := c.Machines().Masters
	var out []string
	for _, b := range cfg.Services[i].Backends {
		host, _, err := net.SplitHostPort(b)
		if err != nil {
			host = b
		}
		for _, m := range masters {
			if h, ok := sshconfig.Host(c.Config, m); ok && h.Address == host {
				out = append(out, m)
			}
		}
	}
	return out, nil
}

// hostAddresses returns the addresses of the hosts called names, in
// order; a name no host has is left out.
func hostAddresses(c *platforms.Cluster, names []string) []string {
	var out []string
	for _, n := range names {
		if h, ok := sshconfig.Host(c.Config, n); ok {
			out = append(out, h.Address)
		}
	}
	return out
}
