// Package upgrade plans `kiln upgrade cluster`: moving a running cluster to
// a newer pinned release (package release) node by node. MakePlan turns the
// cluster's observed versions (Inventory) and a target release into an
// ordered list of steps (etcd member by member, then each master's API
// server, then its controller manager and scheduler, then the kubelets of
// the masters, then the workers, then the cluster's add-ons) and refuses a
// downgrade, a skipped minor, and any order that would break the
// Kubernetes version-skew policy at some step (Violations). Healthy checks
// that the cluster is fit to start: every node Ready, every etcd member
// answering, every control-plane pod Ready. RemovedAPIs names the API
// versions the cluster's clients still ask for that the target removes,
// StoredObjects the objects written through them (RemovedKinds);
// Snapshot saves etcd into --dir before the first change.
package upgrade
