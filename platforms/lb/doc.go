// Package lb is the API load balancer of the local platform: a small TCP
// proxy that runs on the host as a detached `kiln lb` process, listens on the
// bridge gateway address (the API VIP) and spreads new connections
// round-robin over the healthy backends of each port: 6443 (the Kubernetes
// API, health-checked with HTTPS GET /readyz) and 22623 (the machine-config
// server, health-checked with a TCP connect). It reloads its JSON
// configuration on SIGHUP or when the file changes, which is how the
// bootstrap machine leaves the pools. It never routes traffic off the host:
// it only listens on the address it is given and dials the backends named in
// its configuration. A service may close connections idle for a while and
// cap how many it proxies at once (`kiln service-lb` sets both; the API
// ports set neither).
package lb
