package provision

import (
	"context"
	"fmt"
	"path"
	"strings"

	"github.com/kiln-project/kiln/assets/release"
	"github.com/kiln-project/kiln/ignition/nodelayout"
	"github.com/kiln-project/kiln/platforms"
	"github.com/kiln-project/kiln/platforms/nodeimage"
)

var _ platforms.Upgrader = (*Provisioner)(nil)

// PrepareRelease builds or reuses the node image of release version and
// writes its node payload (the system extension every host merges) into
// the cache, with the running kiln binary.
func (p *Provisioner) PrepareRelease(ctx context.Context, c *platforms.Cluster, version string) error {
	r, err := release.Lookup(version)
	if err != nil {
		return err
	}
	_, err = p.payloadOf(ctx, c, r)
	return err
}

// StageRelease pushes the node payload of release version to node's host,
// at nodelayout.ReleasesDir/<version> (PushDir: whole or as it was), unless
// the host has it there or merged already. The node's agent merges it in
// place of the running one when its kubelet changes.
func (p *Provisioner) StageRelease(ctx context.Context, c *platforms.Cluster, node, version string) error {
	r, err := release.Lookup(version)
	if err != nil {
		return err
	}
	addr, err := hostAddress(c, node)
	if err != nil {
		return err
	}
	client, err := newClient(c.Config.Platform.SSH)
	if err != nil {
		return err
	}
	staged, merged := path.Join(nodelayout.ReleasesDir, version), path.Join(nodelayout.ExtensionsDir, nodeimage.SysextName(version))
	out, err := client.RunScript(ctx, addr, hasPayloadScript(staged, merged))
	if err != nil {
		return fmt.Errorf("host %s (%s): %w", node, addr, err)
	}
	if strings.TrimSpace(string(out)) == "yes" {
		return nil
	}
	payload, err := p.payloadOf(ctx, c, r)
	if err != nil {
		return err
	}
	end := p.Env.Progress.Start(fmt.Sprintf("Pushing the node payload of %s to %s", version, node))
	err = client.PushDir(ctx, addr, payload, staged, nil)
	end(err)
	if err != nil {
		return fmt.Errorf("host %s (%s): %w", node, addr, err)
	}
	return nil
}

// hasPayloadScript prints yes when one of dirs is a directory (not a
// link), else no.
func hasPayloadScript(dirs ...string) string {
	var b strings.Builder
	for _, d := range dirs {
		fmt.Fprintf(&b, "if [ -d '%s' ] && [ ! -L '%s' ]; then echo yes; exit 0; fi\n", d, d)
	}
	b.WriteString("echo no\n")
	return b.String()
}
