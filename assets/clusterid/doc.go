// Package clusterid is the cluster's identity: a UUID and the infra ID,
// the short unique name every machine, bridge and Terraform resource of the
// cluster is named and labelled after.
package clusterid
