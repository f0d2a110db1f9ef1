package conformance

// NetpolFocus selects every upstream NetworkPolicy spec of e2e.test: the
// "Netpol" specs of sig-network labelled [Feature:NetworkPolicy] (TCP, UDP
// and SCTP), which `make netpol` runs.
const NetpolFocus = `\[Feature:NetworkPolicy\]`

// netpolPrefix starts the name of every spec of the upstream suite's TCP
// context.
const netpolPrefix = "[sig-network] Netpol NetworkPolicy between server and client "

// netpolSubset are the NetworkPolicy specs the end-to-end suite runs: a
// default deny, named ports, an ipBlock with except on egress, a namespace
// selector whose namespace is relabelled, a deleted policy and UDP - one
// spec for each way a policy engine's rules are built.
var netpolSubset = [...]string{
	netpolPrefix + "should support a 'default-deny-ingress' policy [Feature:NetworkPolicy]",
	netpolPrefix + "should allow ingress access on one named port [Feature:NetworkPolicy]",
	netpolPrefix + "should enforce except clause while egress access to server in CIDR block [Feature:NetworkPolicy]",
	netpolPrefix + "should allow ingress access from updated namespace [Feature:NetworkPolicy]",
	netpolPrefix + "should stop enforcing policies after they are deleted [Feature:NetworkPolicy]",
	"[sig-network] Netpol [LinuxOnly] NetworkPolicy between server and client using UDP should support a 'default-deny-ingress' policy [Feature:NetworkPolicy]",
}

// NetpolSubset returns the names of the NetworkPolicy subset's specs.
func NetpolSubset() []string {
	return append([]string(nil), netpolSubset[:]...)
}

// NetpolSubsetFocus returns the ginkgo focus regexp that selects exactly
// the NetworkPolicy subset's specs.
func NetpolSubsetFocus() string {
	return anyOf(netpolSubset[:])
}

// NetpolCannotRunSkip returns the ginkgo skip regexp of the NetworkPolicy
// specs that cannot run on these hosts: the SCTP connectivity ones, whose
// servers cannot open an SCTP socket on a kernel without SCTP
// (docs/conformance.md gives the evidence).
func NetpolCannotRunSkip() string {
	return `\[Feature:SCTPConnectivity\]`
}
