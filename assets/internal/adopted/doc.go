// Package adopted checks files kiln adopts from --dir (a file the user put
// or edited there wins over the generated one) against the cluster they
// are adopted into, as the state holds it or as this run generates it:
// every certificate they hold must chain to one of the cluster's CAs (or
// be one), and every cluster name, cluster ID and infra ID they name must
// be the cluster's. Otherwise --dir would hold two clusters: say, a
// bootstrap.ign copied from another cluster whose certificates no
// kubeconfig kiln writes would trust.
//
// Ignition configs are searched through: every file they write (decoded
// from its data URL and gunzipped), the CAs they trust, the configs they
// merge, and the Ignition configs inside those (the machine-config
// server's). Base64-encoded PEM, as kubeconfigs and Secrets hold it, is
// decoded. The assets' CheckAdopted (graph.AdoptionChecker) run it.
package adopted
