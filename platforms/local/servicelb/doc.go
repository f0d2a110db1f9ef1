// Package servicelb gives LoadBalancer Services of a local cluster an
// address reachable from the host, as cloud-provider-kind does for kind. It
// runs on the host as a detached `kiln service-lb` process next to the API
// load balancer: it watches Services of type LoadBalancer (without a
// loadBalancerClass) and the Nodes, gives each Service an address from a
// pool at the top of the machine network, adds that address to the
// cluster's host bridge (a /32, so nothing else routes there), listens on
// the Service's TCP ports on that address only and proxies each connection
// to the Service's node port on a node that passes a TCP health check (the
// API load balancer's proxy, platforms/lb). A node is reached at the
// address kiln assigned its machine (Machines), never at one the Node
// reports; a proxied connection idle both ways for DefaultIdleTimeout is
// closed, and each port proxies at most DefaultMaxConns connections at
// once. It writes the address into status.loadBalancer.ingress, so `kubectl
// get svc` shows it, and takes the address off the bridge when the Service
// is deleted or changes type.
package servicelb
