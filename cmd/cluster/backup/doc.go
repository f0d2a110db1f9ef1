// Package backup takes a cluster's backup, `kiln backup cluster`: a
// snapshot of etcd, whose integrity is checked as it is taken, and the
// files of --dir that the cluster's --dir needs again once restored
// (installdir.BackedUp: the state with the CAs and their keys, the
// records of the machines, the Terraform state, the kubeconfigs), in one
// gzip-compressed tar archive (Write) with a manifest, backup.json, that
// names the cluster and holds the SHA-256 of every member; Check reads
// an archive back against its manifest. The archive is written 0600,
// atomically: it holds every Secret of the cluster and the keys of its
// CAs.
package backup
