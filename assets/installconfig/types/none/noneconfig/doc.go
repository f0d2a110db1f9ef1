// Package none is user-provisioned infrastructure: kiln writes the Ignition
// configs and the user boots machines with them, providing DNS and the API
// load balancer.
package noneconfig
