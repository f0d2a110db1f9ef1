// Package bootkube runs on the bootstrap machine once its temporary control
// plane is up. It applies the cluster's manifests, then grows etcd onto the
// masters one member at a time (learner, then voter), waits for the masters'
// API servers, removes the bootstrap member and records bootstrap-complete
// in the kube-system/bootstrap ConfigMap. Every step is idempotent, so the
// unit can be restarted at any point.
package bootkube
