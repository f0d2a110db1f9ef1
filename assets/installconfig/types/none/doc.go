// Package none is the schema of the none platform's section of
// install-config.yaml, platform.none, which has no fields: on the none
// platform kiln writes the Ignition configs and the user provides the
// machines, DNS and the API load balancer. Like package types, it imports
// nothing of kiln.
package none
