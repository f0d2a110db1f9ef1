// Package machineconfig is kiln's machine-config API after install: the
// MachineConfig and MachineConfigPool custom resources (kiln.dev/v1alpha1,
// modelled on OpenShift's Machine Config Operator), the names scripts rely
// on (the pool label, the Node annotations and states), and Render, which
// merges a pool's MachineConfigs into the one rendered config its nodes
// apply; what a rendered config puts on a node (PlanFor), the node
// agent's record of it (State), and a machine's first config with its
// pool's merged in (FirstBoot, WithPoolConfig). The controller that rolls
// rendered configs out pool by pool is cmd/node/mccontroller, the agent on
// every node that applies them and watches for drift cmd/node/mcagent.
// docs/machine-config.md is the user's description.
package machineconfig

import (
	"encoding/json"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Group and Version of the API.
const (
	Group   = "kiln.dev"
	Version = "v1alpha1"
)

// The resources, for the dynamic client.
var (
	// MachineConfigs is the cluster-scoped MachineConfig resource.
	MachineConfigs = schema.GroupVersionResource{Group: Group, Version: Version, Resource: "machineconfigs"}
	// MachineConfigPools is the cluster-scoped MachineConfigPool resource.
	MachineConfigPools = schema.GroupVersionResource{Group: Group, Version: Version, Resource: "machineconfigpools"}
)

// Names other tools rely on; they are part of the API.
const (
	// PoolLabel on a MachineConfig names the pool it joins.
	PoolLabel = "kiln.dev/pool"
	// RenderedForLabel on a rendered config names the pool it was rendered
	// for. Rendered configs carry no PoolLabel, so they never join a pool.
	RenderedForLabel = "kiln.dev/rendered-for"
	// CurrentConfigAnnotation on a Node is the rendered config its agent
	// last applied in full.
	CurrentConfigAnnotation = "kiln.dev/current-config"
	// DesiredConfigAnnotation on a Node is the rendered config the
	// controller wants it to apply.
	DesiredConfigAnnotation = "kiln.dev/desired-config"
	// StateAnnotation on a Node is its agent's state: StateDone,
	// StateWorking or StateDegraded.
	StateAnnotation = "kiln.dev/state"
	// ReasonAnnotation on a Node says why it is Degraded (or what it is
	// doing while Working).
	ReasonAnnotation = "kiln.dev/reason"
	// CordonedAnnotation on a Node marks that the controller cordoned it
	// for an update, so that it uncordons only what it cordoned.
	CordonedAnnotation = "kiln.dev/cordoned-for-config"
	// DesiredReleaseAnnotation on a Node is the release each of its
	// components should run, as a JSON object of component names
	// ("etcd", "kube-apiserver", "kubelet"...) to Kubernetes release
	// versions kiln pins ("v1.36.3"): kiln upgrade cluster sets it, one
	// component at a time in the version-skew order, and the node's agent
	// makes it so from the payload the upgrade staged (ReleasesDir). A
	// component it leaves out stays as it runs.
	DesiredReleaseAnnotation = "kiln.dev/desired-release"
	// CurrentReleaseAnnotation on a Node is the DesiredReleaseAnnotation
	// its agent last made true in full (the same value).
	CurrentReleaseAnnotation = "kiln.dev/current-release"
	// PausedByAnnotation on a MachineConfigPool names what paused it for
	// a while (kiln upgrade cluster), which unpauses it when done; a pool
	// the user paused has none and is left paused.
	PausedByAnnotation = "kiln.dev/paused-by"
)

// The agent's states.
const (
	StateDone     = "Done"
	StateWorking  = "Working"
	StateDegraded = "Degraded"
)

// The pools that exist from install; every other pool is custom.
const (
	MasterPool = "master"
	WorkerPool = "worker"
)

// RenderedPrefix starts the name of every rendered config:
// rendered-<pool>-<hash>.
const RenderedPrefix = "rendered-"

// MachineConfig is one fragment of a pool's configuration.
type MachineConfig struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              MachineConfigSpec `json:"spec"`
}

// MachineConfigSpec is what a MachineConfig asks of its pool's nodes.
type MachineConfigSpec struct {
	// Config is an Ignition 3.3 config: storage.files and
	// storage.directories, systemd.units with their drop-ins. What a
	// running node cannot apply is refused by Render, naming the field.
	Config json.RawMessage `json:"config,omitempty"`
	// KubeletConfig is a partial KubeletConfiguration
	// (kubelet.config.k8s.io/v1beta1, without apiVersion and kind) that the
	// kubelet reads as a drop-in over kiln's own configuration.
	KubeletConfig json.RawMessage `json:"kubeletConfig,omitempty"`
}

// MachineConfigPool is a set of nodes that share one rendered config.
type MachineConfigPool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              PoolSpec   `json:"spec"`
	Status            PoolStatus `json:"status,omitempty"`
}

// PoolSpec is how a pool selects and updates its nodes.
type PoolSpec struct {
	// NodeSelector selects a custom pool's nodes; master and worker select
	// the nodes of their role (label node.kiln.dev/role) and ignore it.
	NodeSelector *metav1.LabelSelector `json:"nodeSelector,omitempty"`
	// Paused holds the pool's nodes at the config they have.
	Paused bool `json:"paused,omitempty"`
	// MaxUnavailable is how many of the pool's nodes may be updating or
	// not Ready at once (default 1; master is always 1).
	MaxUnavailable *int32 `json:"maxUnavailable,omitempty"`
}

// PoolStatus is what the controller reports about a pool.
type PoolStatus struct {
	// ObservedGeneration is the generation of the spec this status is for.
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Configuration is the rendered config the pool's nodes are moving to.
	Configuration string `json:"configuration,omitempty"`
	// MachineCount is the number of nodes in the pool.
	MachineCount int32 `json:"machineCount"`
	// UpdatedMachineCount counts nodes that run Configuration.
	UpdatedMachineCount int32 `json:"updatedMachineCount"`
	// ReadyMachineCount counts updated nodes that are Ready and schedulable.
	ReadyMachineCount int32 `json:"readyMachineCount"`
	// UnavailableMachineCount counts nodes that are updating or not Ready.
	UnavailableMachineCount int32 `json:"unavailableMachineCount"`
	// DegradedMachineCount counts nodes whose agent reports Degraded.
	DegradedMachineCount int32 `json:"degradedMachineCount"`
	// Conditions are Updated, Updating, Degraded and RenderDegraded.
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Pool condition types.
const (
	ConditionUpdated        = "Updated"
	ConditionUpdating       = "Updating"
	ConditionDegraded       = "Degraded"
	ConditionRenderDegraded = "RenderDegraded"
)
