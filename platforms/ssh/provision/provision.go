package provision

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/kiln-project/kiln/assets/installconfig/types"
	"github.com/kiln-project/kiln/assets/installconfig/types/configs"
	"github.com/kiln-project/kiln/assets/installconfig/types/ssh"
	"github.com/kiln-project/kiln/assets/installconfig/types/ssh/sshconfig"
	"github.com/kiln-project/kiln/assets/release"
	tfdata "github.com/kiln-project/kiln/data/terraform"
	"github.com/kiln-project/kiln/ignition/nodelayout"
	"github.com/kiln-project/kiln/platforms"
	"github.com/kiln-project/kiln/platforms/lb"
	"github.com/kiln-project/kiln/platforms/nodeimage"
	"github.com/kiln-project/kiln/platforms/ssh/footprint"
	"github.com/kiln-project/kiln/platforms/ssh/preflight"
	"github.com/kiln-project/kiln/platforms/ssh/provider"
	"github.com/kiln-project/kiln/platforms/ssh/remote"
	"github.com/kiln-project/kiln/platforms/terraform"
)

var _ platforms.Provisioner = (*Provisioner)(nil)

// Provisioner provisions ssh-platform clusters onto the hosts
// platform.ssh lists, through Terraform and the kilnssh provider in the
// kiln binary.
type Provisioner struct {
	Env platforms.Env
}

// Preflight implements platforms.Provisioner: every host still to
// install is asked over SSH, nothing changed, and every problem of every
// host reported at once. A host that keeps kiln's record was installed by
// an earlier run of this create, which resumes: its ports are kiln's now.
func (p *Provisioner) Preflight(ctx context.Context, c *platforms.Cluster) error {
	client, err := newClient(c.Config.Platform.SSH)
	if err != nil {
		return &platforms.ConfigError{Err: fmt.Errorf("install-config.yaml: platform.ssh: %w", err)}
	}
	hosts, installed := p.notInstalled(ctx, client, clusterHosts(c))
	if len(hosts) == 0 {
		return nil
	}
	end := p.Env.Progress.Start(fmt.Sprintf("Checking %d hosts over SSH", len(hosts)))
	warnings, err := preflight.Run(ctx, hosts, installed, client)
	end(err)
	for _, w := range warnings {
		p.Env.Log.Warn(w)
	}
	return err
}

// notInstalled returns the hosts of hosts that keep no record of kiln's
// install, or cannot say (the preflight names a host it cannot reach),
// and the others.
func (p *Provisioner) notInstalled(ctx context.Context, h footprint.Host, hosts []preflight.Host) (check, installed []preflight.Host) {
	for _, host := range hosts {
		if rec, err := footprint.Recorded(ctx, h, host.Address); err == nil && rec {
			p.Env.Log.Infof("Host %s (%s) is installed already: not checked again", host.Name, host.Address)
			installed = append(installed, host)
			continue
		}
		check = append(check, host)
	}
	return check, installed
}

// clusterHosts are c's hosts that run a node's units, in the order
// platform.ssh lists them: the bootstrap host until bootstrap-complete
// was recorded (then it is reset, and may come back as a worker), and
// the masters and workers of c.Machines() (only the masters while the
// workers are held back). The preflight checks them and the waits ask
// them for failed units.
func clusterHosts(c *platforms.Cluster) []preflight.Host {
	shape := c.Machines()
	speaker := configs.Addons(c.Config).MetalLB()
	timeServers := len(c.Config.Platform.SSH.NTPServers) > 0
	var out []preflight.Host
	for _, h := range c.Config.Platform.SSH.Hosts {
		switch {
		case h.Role == ssh.RoleBootstrap && !c.BootstrapDone:
			out = append(out, preflight.Host{Name: h.Name, Address: h.Address, Role: preflight.Role(h.Role), TimeServers: timeServers})
		case slices.Contains(shape.All(), h.Name):
			out = append(out, preflight.Host{Name: h.Name, Address: h.Address, Role: preflight.Role(nodeRole(h)), Speaker: speaker, TimeServers: timeServers})
		}
	}
	return out
}

// nodeRole is the role h's node has: the bootstrap host that joins as a
// worker is one.
func nodeRole(h ssh.Host) string {
	if h.Role == ssh.RoleBootstrap {
		return ssh.RoleWorker
	}
	return h.Role
}

// Provision implements platforms.Provisioner: the node payload of c's
// release, then the bootstrap stage (until bootstrap-complete) and the
// cluster stage, which install every host, and start the node of any
// host that kiln stop cluster stopped.
func (p *Provisioner) Provision(ctx context.Context, c *platforms.Cluster) error {
	drv, err := p.driver(ctx, c.Dir)
	if err != nil {
		return err
	}
	// A cluster keeps the payload it was created with: a resumed create
	// with a newer kiln must not reinstall the hosts.
	var prev *tfdata.SSHVars
	payload := ""
	var last tfdata.SSHVars
	if err := drv.LastVars(terraform.StageCluster, &last); err == nil {
		prev, payload = &last, last.Payload
	}
	if payload == "" {
		if payload, err = p.ensurePayload(ctx, c); err != nil {
			return err
		}
	}
	vars, err := Vars(c, payload)
	if err != nil {
		return &platforms.ConfigError{Err: err}
	}
	if err := p.hostPayloads(ctx, c, prev, &vars); err != nil {
		return err
	}
	boot := sshconfig.Hosts(c.Config, ssh.RoleBootstrap)
	steps := []step{
		{terraform.StageBootstrap, fmt.Sprintf("Installing the bootstrap host %s", boot[0].Name), vars},
		{terraform.StageCluster, fmt.Sprintf("Installing %d masters and %d workers", len(vars.Masters), len(vars.Workers)), vars},
	}
	if c.BootstrapDone {
		steps = steps[1:]
	}
	return p.applySteps(ctx, drv, steps)
}

// DestroyBootstrap implements platforms.Provisioner: the bootstrap stage
// applied without its host, which resets it; then the API proxies of the
// cluster stage's hosts lose it as a backend (a machine at its address
// that answered on 6443 later, another cluster's, must not get this
// cluster's traffic). Both steps are idempotent.
func (p *Provisioner) DestroyBootstrap(ctx context.Context, c *platforms.Cluster) error {
	drv, err := p.driver(ctx, c.Dir)
	if err != nil {
		return err
	}
	var vars tfdata.SSHVars
	err = drv.LastVars(terraform.StageBootstrap, &vars)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err == nil && vars.Bootstrap != nil {
		end := p.Env.Progress.Start(fmt.Sprintf("Resetting the bootstrap host %s", vars.Bootstrap.Name))
		vars.Bootstrap = nil
		err = drv.Apply(ctx, terraform.StageBootstrap, vars)
		end(err)
		if err != nil {
			return err
		}
	}
	var cluster tfdata.SSHVars
	if err := drv.LastVars(terraform.StageCluster, &cluster); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	client, err := newClient(c.Config.Platform.SSH)
	if err != nil {
		return err
	}
	return p.dropBootstrapBackend(ctx, client, c, slices.Concat(cluster.Masters, cluster.Workers))
}

// dropBootstrapBackend gives the API proxies of hosts the configuration
// without the bootstrap host.
func (p *Provisioner) dropBootstrapBackend(ctx context.Context, h footprint.Host, c *platforms.Cluster, hosts []tfdata.SSHHost) error {
	proxy, err := APIProxyConfig(c.Config, true)
	if err != nil {
		return err
	}
	end := p.Env.Progress.Start(fmt.Sprintf("Taking the bootstrap host out of %d hosts' API proxies", len(hosts)))
	err = p.setProxies(ctx, h, hosts, nil, proxy)
	end(err)
	return err
}

// setProxies gives the API proxy of each of hosts the configuration
// proxy, and names every host that failed; a host in leaving, about to
// be reset, that fails is only warned about.
func (p *Provisioner) setProxies(ctx context.Context, h footprint.Host, hosts []tfdata.SSHHost, leaving []string, proxy string) error {
	var errs []error
	for _, host := range hosts {
		err := footprint.SetAPIProxy(ctx, h, host.Address, []byte(proxy))
		switch {
		case err == nil:
		case slices.Contains(leaving, host.Name):
			p.Env.Log.Warnf("host %s, about to be reset, keeps its old API proxy configuration: %v", host.Name, err)
		default:
			errs = append(errs, fmt.Errorf("host %s: %w", host.Name, err))
		}
	}
	return errors.Join(errs...)
}

// Destroy implements platforms.Provisioner: the cluster stage, then the
// bootstrap stage, each resetting its hosts to how they were, by the
// record each keeps; then the cluster's node payload.
func (p *Provisioner) Destroy(ctx context.Context, dir, infraID string) error {
	var errs []error
	if dir != "" {
		drv, err := p.driver(ctx, dir)
		if err != nil {
			return err
		}
		for _, stage := range []string{terraform.StageCluster, terraform.StageBootstrap} {
			var vars tfdata.SSHVars
			err := drv.LastVars(stage, &vars)
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err == nil {
				end := p.Env.Progress.Start("Resetting the hosts of stage " + stage)
				err = drv.Destroy(ctx, stage, vars)
				end(err)
			}
			errs = append(errs, err)
		}
	}
	if infraID != "" && errors.Join(errs...) == nil {
		errs = append(errs, os.RemoveAll(p.payloadRoot(infraID)))
	}
	return errors.Join(errs...)
}

// payloadRoot is the directory of infraID's node payload in kiln's cache.
func (p *Provisioner) payloadRoot(infraID string) string {
	return filepath.Join(p.Env.CacheDir, "ssh-payloads", infraID)
}

// ensurePayload returns the node payload of c's release with the running
// kiln binary, written into the cache once per cluster (hard links to
// the node image's files).
func (p *Provisioner) ensurePayload(ctx context.Context, c *platforms.Cluster) (string, error) {
	return p.payloadOf(ctx, c, c.Resolved.Release)
}

// payloadOf returns the node payload of release r for cluster c, written
// into the cache once per cluster and release.
func (p *Provisioner) payloadOf(ctx context.Context, c *platforms.Cluster, r release.Release) (string, error) {
	img, err := nodeimage.Ensure(ctx, nodeimage.Options{CacheDir: p.Env.CacheDir, Log: p.Env.Log, Progress: p.Env.Progress, Release: r, Proxy: c.Config.Proxy})
	if err != nil {
		return "", err
	}
	dest := filepath.Join(p.payloadRoot(c.InfraID), nodeimage.SysextName(img.Release.Kubernetes))
	if _, err := os.Stat(dest); err == nil {
		return dest, nil
	}
	if err := os.MkdirAll(filepath.Dir(dest), 0o755); err != nil {
		return "", err
	}
	end := p.Env.Progress.Start("Writing the node payload " + filepath.Base(dest))
	err = img.WriteSysext(dest, p.Env.Kiln)
	end(err)
	return dest, err
}

// hostPayloads gives each host of vars that boots another release than
// the cluster's payload its own, as setPayloads says; a release's payload
// is written into the cache when it lacks it.
func (p *Provisioner) hostPayloads(ctx context.Context, c *platforms.Cluster, prev, vars *tfdata.SSHVars) error {
	return setPayloads(c, prev, vars, func(version string) (string, error) {
		r, err := release.Lookup(version)
		if err != nil {
			return "", err
		}
		return p.payloadOf(ctx, c, r)
	})
}

// setPayloads gives each master and worker of vars the node payload of
// its release when that is not the cluster's (platforms.Cluster.Releases):
// for a host the cluster stage prev was applied with, its payload there (a
// payload never changes under a host, which would be reinstalled: a host
// installed with the cluster's payload keeps it), else payload of the
// host's release.
func setPayloads(c *platforms.Cluster, prev, vars *tfdata.SSHVars, payload func(version string) (string, error)) error {
	had := map[string]tfdata.SSHHost{}
	if prev != nil {
		for _, h := range slices.Concat(prev.Masters, prev.Workers) {
			had[h.Name] = h
		}
	}
	for _, hosts := range [][]tfdata.SSHHost{vars.Masters, vars.Workers} {
		for i := range hosts {
			h := &hosts[i]
			if old, ok := had[h.Name]; ok {
				h.Payload = old.Payload
				continue
			}
			if v := c.ReleaseOf(h.Name); v != c.Resolved.Release.Kubernetes {
				dir, err := payload(v)
				if err != nil {
					return fmt.Errorf("the node payload of %s, which host %s boots: %w", v, h.Name, err)
				}
				h.Payload = dir
			}
		}
	}
	return nil
}

// Vars returns the stages' variables of c with the node payload at
// payload: the bootstrap host until bootstrap-complete, and the masters
// and workers of c.Machines() (only the masters while the workers are
// held back; the bootstrap host that joins as a worker, among the
// workers of the shape, only after bootstrap-complete).
func Vars(c *platforms.Cluster, payload string) (tfdata.SSHVars, error) {
	s := c.Config.Platform.SSH
	known, err := knownHostsFile(s)
	if err != nil {
		return tfdata.SSHVars{}, err
	}
	proxy, err := APIProxyConfig(c.Config, c.BootstrapDone)
	if err != nil {
		return tfdata.SSHVars{}, err
	}
	port := int(s.Port)
	v := tfdata.SSHVars{
		SSHUser: s.User, SSHKnownHostsFile: known, SSHPort: &port, Payload: payload,
		APIProxy:          &proxy,
		BootstrapIgnition: string(c.Bootstrap), MasterIgnition: string(c.Master), WorkerIgnition: string(c.Worker),
		Masters: []tfdata.SSHHost{}, Workers: []tfdata.SSHHost{},
	}
	if s.IdentityFile != "" {
		v.SSHIdentityFile = &s.IdentityFile
	}
	if s.Bastion != "" {
		v.SSHBastion = &s.Bastion
	}
	if len(s.NTPServers) > 0 {
		v.NTPServers = s.NTPServers
	}
	shape := c.Machines()
	for _, h := range s.Hosts {
		th := tfdata.SSHHost{Name: h.Name, Address: h.Address, IP: h.Address}
		switch {
		case h.Role == ssh.RoleBootstrap && !c.BootstrapDone:
			v.Bootstrap = &th
		case slices.Contains(shape.Masters, h.Name):
			v.Masters = append(v.Masters, th)
		case slices.Contains(shape.Workers, h.Name):
			v.Workers = append(v.Workers, th)
		}
	}
	return v, nil
}

// APIProxyConfig is the configuration of every host's proxy (kiln lb,
// footprint.APIProxyUnit): on 127.0.0.1, the API (ssh.APIProxyPort) and
// the machine-config server (ssh.MachineConfigProxyPort) of the masters,
// and of the bootstrap host until bootstrapDone, each backend
// health-checked, so that a node reaches them as long as one of them
// serves.
func APIProxyConfig(c *types.Config, bootstrapDone bool) (string, error) {
	var addrs []string
	for _, h := range c.Platform.SSH.Hosts {
		if h.Role == ssh.RoleBootstrap && !bootstrapDone || h.Role == ssh.RoleMaster {
			addrs = append(addrs, h.Address)
		}
	}
	return proxyConfig(addrs)
}

// proxyConfig is the hosts' proxy configuration with the API and
// machine-config servers at addrs as its backends.
func proxyConfig(addrs []string) (string, error) {
	var api, mcs []string
	for _, a := range addrs {
		api = append(api, a+":6443")
		mcs = append(mcs, a+":"+strconv.Itoa(nodelayout.MCSPort))
	}
	cfg := lb.Config{Listen: "127.0.0.1", Services: []lb.Service{
		{Name: "api", Port: ssh.APIProxyPort, Backends: api, Health: lb.CheckHTTPS, HealthPath: "/readyz"},
		{Name: "machine-config", Port: ssh.MachineConfigProxyPort, Backends: mcs, Health: lb.CheckTCP},
	}}
	if err := cfg.Validate(); err != nil {
		return "", fmt.Errorf("the hosts' API proxy: %w", err)
	}
	data, err := json.Marshal(cfg)
	return string(data), err
}

// knownHostsFile returns platform.ssh.knownHostsFile, or the running
// user's ~/.ssh/known_hosts.
func knownHostsFile(s *ssh.Platform) (string, error) {
	if s.KnownHostsFile != "" {
		return s.KnownHostsFile, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("platform.ssh.knownHostsFile is unset and the home directory is unknown: %w", err)
	}
	return filepath.Join(home, ".ssh", "known_hosts"), nil
}

// newClient dials the hosts as s says, for what kiln asks them itself
// (the preflight, the waits' diagnostics).
func newClient(s *ssh.Platform) (*remote.Client, error) {
	known, err := knownHostsFile(s)
	if err != nil {
		return nil, err
	}
	return remote.New(remote.Config{User: s.User, Port: int(s.Port), IdentityFile: s.IdentityFile, KnownHostsFile: known, Bastion: s.Bastion})
}

// driver returns the Terraform driver of the cluster in dir.
func (p *Provisioner) driver(ctx context.Context, dir string) (*terraform.Driver, error) {
	modules, err := tfdata.Platform(ssh.Name)
	if err != nil {
		return nil, err
	}
	return terraform.EnsureDriver(ctx, terraform.BuildOptions{CacheDir: p.Env.CacheDir, Log: p.Env.Log, Progress: p.Env.Progress}, dir, modules,
		func(abs string) terraform.Provider { return provider.TerraformProvider(p.Env.Kiln, abs) })
}
