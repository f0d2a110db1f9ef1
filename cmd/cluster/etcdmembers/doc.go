// Package etcdmembers is kiln's one home for etcd membership: bootkube
// grows etcd onto the masters with it at bootstrap, and kiln scale cluster
// adds, removes and replaces masters with it from the host.
//
// A member joins one change at a time (Join): it is added as a learner,
// its certificates and static pod are put on its machine by an Installer
// (PodInstaller: the etcd installer pod), and it is promoted to voter once
// etcd lets it vote, which etcd refuses until the learner has caught up.
// Quorum refuses to let a voter go when those left would not have a
// majority that answers, naming the members that do not; Remove removes a
// member after that check. Check, CaughtUp and MoveLeader are what a
// rolling change of one member at a time needs: who answers, whether a
// member has applied what its leader committed, and handing leadership
// away before its leader stops.
//
// It also holds a member's certificates (Issue, Files, LoadCA) and the etcd
// client kiln dials with them (Dial, DialPEM). It is neither an on-node
// agent nor part of the host's CLI, so both import it.
package etcdmembers
