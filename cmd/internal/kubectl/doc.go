// Package kubectl is `kiln kubectl`: it runs the cluster release's own
// kubectl (built with the node image, in kiln's cache) against the cluster
// of --dir, and it tells whether another kubectl is within the Kubernetes
// version skew policy of the cluster (kubectl is supported within one minor
// version of the API server), so `kiln create cluster` can say when the
// kubectl on PATH is not.
package kubectl
