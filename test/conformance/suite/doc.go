// Package suite builds the upstream Kubernetes conformance suite that
// kiln's own tests run (test/conformance/run.sh, the end-to-end suite):
// e2e.test, kubectl and the ginkgo CLI of the pinned release, built from
// source from the wrapper module in data/conformance, and every test image
// the [Conformance] specs run, in one docker-archive. It builds in the kiln
// cache with the node image builder's toolkit (nodeimage.Toolkit), so it
// shares the node image's Go environment, Go build cache and its etcd and
// pause builds:
//
//	<cache>/conformance/bin-<hash>/bin/     e2e.test, kubectl and the test images' Go programs
//	<cache>/conformance/busybox-<hash>/     BusyBox built from upstream's release
//	<cache>/conformance/debian-<hash>/      the test images' Debian tree
//	<cache>/conformance/<version>-<hash>/   bin (a link), images.tar, images.txt
//
// `conformance build` (test/conformance/cmd/conformance) runs EnsureConformance.
package suite
