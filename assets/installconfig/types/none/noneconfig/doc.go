// Package noneconfig is the install-config logic of the none platform
// (package none): user-provisioned infrastructure, where kiln writes the
// Ignition configs and the user boots machines with them, providing DNS and
// the API load balancer. It is one of the contracts (test/layering) with
// package none.
package noneconfig
