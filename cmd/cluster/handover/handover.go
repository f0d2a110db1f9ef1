// Package handover is the contract between bootkube, which hands the
// control plane over from the bootstrap machine to the masters, and the
// installer, which waits for that handover (`kiln wait-for
// bootstrap-complete`, `kiln create cluster`): the ConfigMap that records
// bootstrap-complete, the namespace of kiln's own objects and the labels
// both sides select by.
//
// It imports only the standard library, so neither side depends on the
// other.
package handover

// The bootstrap-complete record.
const (
	// CompleteNamespace and CompleteConfigMap name the ConfigMap bootkube
	// writes once the control plane runs on the masters.
	CompleteNamespace = "kube-system"
	CompleteConfigMap = "bootstrap"
	// StatusKey is the ConfigMap's data key; its value is StatusComplete
	// once bootstrap is complete.
	StatusKey      = "status"
	StatusComplete = "complete"
)

// Objects and labels.
const (
	// SystemNamespace holds kiln's own objects: the etcd installer pods and
	// their Secrets, the installer's network check.
	SystemNamespace = "kiln-system"
	// InstallerLabelKey and InstallerLabelValue mark the etcd installer pods.
	InstallerLabelKey   = "app.kubernetes.io/name"
	InstallerLabelValue = "etcd-installer"
	// InstallerSelector selects the etcd installer pods.
	InstallerSelector = InstallerLabelKey + "=" + InstallerLabelValue
	// ControlPlaneLabel is the well-known role label bootkube adds to
	// masters (kubelets may not set it themselves).
	ControlPlaneLabel = "node-role.kubernetes.io/control-plane"
)

// CompleteData is the data of the bootstrap-complete ConfigMap.
func CompleteData() map[string]string { return map[string]string{StatusKey: StatusComplete} }

// IsComplete reports whether data, a bootstrap ConfigMap's data, records
// bootstrap-complete.
func IsComplete(data map[string]string) bool { return data[StatusKey] == StatusComplete }
