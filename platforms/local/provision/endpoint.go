package provision

import (
	"context"
	"os"

	"github.com/kiln-project/kiln/platforms"
	"github.com/kiln-project/kiln/platforms/lb"
	"github.com/kiln-project/kiln/platforms/local/provider"
)

var _ platforms.EndpointChecker = (*Provisioner)(nil)

// APIEndpointProblem implements platforms.EndpointChecker from the API
// load balancer on this host: whether it runs, and the health status it
// writes beside its configuration.
func (p *Provisioner) APIEndpointProblem(_ context.Context, c *platforms.Cluster) string {
	proc := lb.ProcessIn(p.Env.Kiln, p.lbDir(c.InfraID))
	return endpointProblem(proc)
}

// endpointProblem describes what is wrong with the load balancer proc.
func endpointProblem(proc lb.Process) string {
	if _, err := os.Stat(proc.ConfigPath); err != nil {
		return "" // not provisioned (or not readable): nothing is known
	}
	// PID fails only with lb.ErrNotRunning.
	if _, err := proc.PID(); err != nil {
		return "the API load balancer is not running (its log: " + proc.LogFile + ")"
	}
	// A balancer of an older kiln writes no status: nothing is known.
	st, err := lb.ReadStatus(lb.StatusPath(proc.ConfigPath))
	if err != nil {
		return ""
	}
	if p := st.Problem(provider.APIService); p != "" {
		return "API load balancer: " + p
	}
	return ""
}
