package preflight

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Runner runs a shell script as root on the host at address and returns
// what it printed on its standard output (remote.Client does).
type Runner interface {
	RunScript(ctx context.Context, address, script string) ([]byte, error)
}

// Observe runs Script on every host at once and reads what each printed;
// obs[i] is hosts[i]'s. now is this machine's clock.
func Observe(ctx context.Context, hosts []Host, run Runner, now func() time.Time) []Observation {
	obs := make([]Observation, len(hosts))
	var wg sync.WaitGroup
	for i, h := range hosts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o := &obs[i]
			o.Before = now()
			out, err := run.RunScript(ctx, h.Address, Script)
			o.After = now()
			if err != nil {
				o.Err = fmt.Errorf("running the preflight script: %w", err)
				return
			}
			o.Facts, o.Err = ParseFacts(out)
		}()
	}
	wg.Wait()
	return obs
}

// Run observes hosts and checks them, comparing their machine-ids with
// those of installed (hosts of the cluster kiln installed already, which
// are not checked again, only observed): the warnings, and an *Error
// naming every problem of every host.
func Run(ctx context.Context, hosts, installed []Host, run Runner) (warnings []string, err error) {
	return Check(hosts, Observe(ctx, hosts, run, time.Now), MachineIDs(installed, Observe(ctx, installed, run, time.Now)))
}

// MachineIDs returns the machine-id of each of hosts from its observation
// (obs[i] is hosts[i]'s); a host that could not be observed is left out.
func MachineIDs(hosts []Host, obs []Observation) map[Host]string {
	ids := map[Host]string{}
	for i, h := range hosts {
		if obs[i].Err == nil && obs[i].Facts.MachineID != "" {
			ids[h] = obs[i].Facts.MachineID
		}
	}
	return ids
}
