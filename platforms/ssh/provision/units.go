package provision

import (
	"context"
	"fmt"
	"strings"

	"github.com/kiln-project/kiln/platforms"
	"github.com/kiln-project/kiln/platforms/shellquote"
	"github.com/kiln-project/kiln/platforms/ssh/preflight"
)

var _ platforms.UnitChecker = (*Provisioner)(nil)

// scriptRunner is what FailedUnits needs of a *remote.Client.
type scriptRunner interface {
	RunScript(ctx context.Context, address, script string) ([]byte, error)
}

// FailedUnits implements platforms.UnitChecker: it asks systemd on each
// host of c over SSH (the bootstrap host until bootstrap is done, the
// masters, the workers) for its failed units and each one's last journal
// line. A host that does not answer is left out. Units of the user's own
// that failed are named too: they may be why a node does not come up.
func (p *Provisioner) FailedUnits(ctx context.Context, c *platforms.Cluster) ([]platforms.FailedUnit, error) {
	client, err := newClient(c.Config.Platform.SSH)
	if err != nil {
		return nil, err
	}
	return failedUnits(ctx, client, clusterHosts(c)), nil
}

// failedUnits asks each host of hosts through r.
func failedUnits(ctx context.Context, r scriptRunner, hosts []preflight.Host) []platforms.FailedUnit {
	addr := map[string]string{}
	var names []string
	for _, h := range hosts {
		names = append(names, h.Name)
		addr[h.Name] = h.Address
	}
	return platforms.FailedUnitsOf(ctx, hostRunner(r, addr), names)
}

// hostRunner runs a command on the host called name over r, at its
// address in addr, as one shell command line: the platforms.RunFunc of
// the diagnostics shared with the local platform.
func hostRunner(r scriptRunner, addr map[string]string) platforms.RunFunc {
	return func(ctx context.Context, name string, argv ...string) ([]byte, error) {
		quoted := make([]string, len(argv))
		for i, a := range argv {
			quoted[i] = shellquote.Quote(a)
		}
		out, err := r.RunScript(ctx, addr[name], strings.Join(quoted, " ")+"\n")
		if err != nil {
			return nil, fmt.Errorf("host %s (%s): %w", name, addr[name], err)
		}
		return out, nil
	}
}
