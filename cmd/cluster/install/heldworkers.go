package install

import (
	"github.com/kiln-project/kiln/assets/installconfig/types/configs"
	"github.com/kiln-project/kiln/assets/installconfig/types/machines"
	"github.com/kiln-project/kiln/platforms"
)

// On slower hardware (install-config controlPlaneHardwareSpeed: Slower) a
// create holds the workers back until the bootstrap machine is gone, as
// OpenShift's installer leaves its workers to the cluster once the control
// plane runs: while the bootstrap machine's temporary control plane and the
// masters' control plane both run, etcd replicates between them and every
// joining kubelet talks to the temporary API, the workers' own boot, runtime
// and kubelet would only take CPU from them. Measured under emulation
// (docs/benchmarks.md, "The host test"), that window is where creates
// stalled. On Standard hardware the workers boot beside the masters, which
// is faster.

// holdsWorkers reports whether provision creates the masters only: the
// control plane is Slower, bootstrap is not done yet and there are
// workers to hold.
func (c *Cluster) holdsWorkers() bool {
	return !c.BootstrapDone && c.Config.SlowerControlPlane() && len(c.Machines().Workers) > 0
}

// provisionsLate reports whether provisionWorkers has machines to create
// once the bootstrap machine is gone (bootstrap not done yet): the
// workers held back, or the bootstrap machine itself, which joins as a
// worker (the ssh platform's bootstrap host with joinAsWorker: provision
// leaves it out of the workers until bootstrap-complete).
func (c *Cluster) provisionsLate() bool {
	return c.holdsWorkers() || !c.BootstrapDone && configs.BootstrapJoinsAsWorker(c.Config)
}

// mastersOnly is c with its shape cut to the masters, for provision.
func (c *Cluster) mastersOnly() *platforms.Cluster {
	only := c.Cluster
	only.Shape = machines.Shape{Masters: c.Machines().Masters}
	return &only
}
