// Package ignitionconfigs holds the Ignition config assets: bootstrap.ign
// (the full config of the bootstrap machine), the full master and worker
// configs the machine-config server serves, the master.ign and worker.ign
// pointer configs, and metadata.json.
package ignitionconfigs
