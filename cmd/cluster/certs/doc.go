// Package certs reports when a cluster's certificates expire (`kiln certs
// check-expiration`), like `kubeadm certs check-expiration`: the
// certificates of --dir (its state file and any certificate or kubeconfig
// file in it) and, through the API, the kubelets' certificates. It only
// reads: nothing in --dir or in the cluster is changed.
package certs
