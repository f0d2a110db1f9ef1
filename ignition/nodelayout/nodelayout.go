// Package nodelayout is the layout of kiln's machines: the paths, port and
// label that the Ignition configs kiln writes share with the agents that
// read them (`kiln node ...`) and with the platforms that prepare and serve
// the machines. Each is defined here once. The Ignition assets place files
// at these paths and render data/butane's templates with Values; the agents
// take them as flag defaults; the platforms write NodeEnvFile (EnvFile)
// and the local platform balances MCSPort.
//
// It imports only the standard library, so assets, agents and platforms may
// all depend on it.
package nodelayout

import (
	"maps"
	"path"
	"slices"
	"strings"
)

// Every machine.
const (
	// KilnBinary is where the kiln binary is on every machine; units and
	// pods run the agents from it.
	KilnBinary = "/usr/local/bin/kiln"
	// IgnitionConfigFile is the machine's Ignition config, written by the
	// platform before kiln-ignition.service applies it (the node image's
	// ignition-firstboot reads it).
	IgnitionConfigFile = "/var/lib/kiln/ignition/config.ign"
	// KilnConfigDir holds kiln's files on a node (NodeEnvFile,
	// TrustBundleFile, MCSConfigDir).
	KilnConfigDir = "/etc/kiln"
	// NodeEnvFile holds the machine's KEY=value settings (KILN_NODE_IP),
	// written by the platform before first boot and read by units as their
	// EnvironmentFile.
	NodeEnvFile = KilnConfigDir + "/node.env"
	// TrustBundleDir holds TrustBundleFile alone: containerd trusts the
	// certificates of every file there besides the system's
	// (SSL_CERT_DIR), for pulls from registries with a private CA.
	TrustBundleDir = KilnConfigDir + "/trust"
	// TrustBundleFile is install-config's additionalTrustBundle.
	TrustBundleFile = TrustBundleDir + "/additional-trust-bundle.pem"

	// KubernetesDir is the node's Kubernetes configuration directory.
	KubernetesDir = "/etc/kubernetes"
	// StaticPodsSubdir is the kubelet's static pod directory in KubernetesDir.
	StaticPodsSubdir = "manifests"
	// StagedPodsSubdir holds a master's control plane static pods, in
	// KubernetesDir, until its etcd member votes; then they move to
	// StaticPodsSubdir.
	StagedPodsSubdir = "staged-manifests"
	// EtcdPKISubdir holds the etcd CA and member certificates in KubernetesDir.
	EtcdPKISubdir = "pki/etcd"

	// StaticPodDir is the kubelet's static pod directory.
	StaticPodDir = KubernetesDir + "/" + StaticPodsSubdir
	// StagedPodDir is StagedPodsSubdir on the machine.
	StagedPodDir = KubernetesDir + "/" + StagedPodsSubdir
	// RetiredPodDir keeps the bootstrap machine's control plane static pods
	// once bootkube has stopped them (the masters run the control plane).
	RetiredPodDir = KubernetesDir + "/retired-manifests"
	// PKIDir holds the control plane's certificates and keys.
	PKIDir = KubernetesDir + "/pki"
	// SigningCA is the root CA's certificate and key (.crt, .key) that
	// kube-controller-manager signs kubelet and API client certificates
	// with: a file of its own, since its signer takes exactly one
	// certificate and PKIDir/ca.crt holds two during a CA rotation.
	SigningCA = PKIDir + "/signing-ca"
	// SigningKubeletServingCA is the same for kubelet serving certificates
	// and the kubelet serving CA.
	SigningKubeletServingCA = PKIDir + "/signing-kubelet-serving-ca"
	// CARotationMarker names the CA rotation under way on this node
	// (`kiln certs rotate-ca`); a master's automatic renewal waits while
	// it exists.
	CARotationMarker = "/var/lib/kiln/ca-rotation"
	// CARotationBundle is where `kiln certs rotate-ca` puts a node's part
	// of a phase (0600: it holds keys).
	CARotationBundle = "/var/lib/kiln/ca-rotation.json"
	// KubeletPKIDir holds the kubelet's client and serving certificates
	// (kubelet-client-current.pem, kubelet-server-current.pem: links the
	// kubelet points at the newest).
	KubeletPKIDir = "/var/lib/kubelet/pki"
	// EtcdPKIDir is EtcdPKISubdir on the machine.
	EtcdPKIDir = KubernetesDir + "/" + EtcdPKISubdir
	// EtcdDataDir is a master's etcd data (the etcd static pod's).
	EtcdDataDir = "/var/lib/etcd"
	// EtcdRestoreMarker names the last `kiln restore cluster` whose part
	// on this master is done.
	EtcdRestoreMarker = "/var/lib/kiln/etcd-restore"
	// EtcdRestoreSnapshot is where `kiln restore cluster` puts the
	// snapshot on the master that restores it (0600; removed once
	// restored).
	EtcdRestoreSnapshot = "/var/lib/kiln/etcd-restore.db"
	// BackupDir holds the archives of the backups a master takes on
	// install-config's backup.schedule (0700; `kiln node etcd-backup`).
	BackupDir = "/var/lib/kiln/backups"
	// CertsRenewBundle is where `kiln certs renew` puts a master's new
	// certificates and kubeconfigs (0600; removed once in place).
	CertsRenewBundle = "/var/lib/kiln/certs-renew.json"
	// KubeconfigDir holds the control plane components' kubeconfigs.
	KubeconfigDir = KubernetesDir + "/kubeconfigs"
	// BootstrapKubeconfig is the kubelet's bootstrap kubeconfig (a
	// bootstrap token) on joining machines.
	BootstrapKubeconfig = KubernetesDir + "/bootstrap-kubeconfig"
	// KubeletKubeconfig is the kubeconfig the kubelet writes once its client
	// certificate is issued; node agents use the node's credentials from it.
	KubeletKubeconfig = "/var/lib/kubelet/kubeconfig"
	// RoleLabel is the label kubelets register with (--node-labels), whose
	// value is the machine's role.
	RoleLabel = "node.kiln.dev/role"
	// KubeletConfigDir is the kubelet's drop-in configuration directory
	// (--config-dir), rebuilt at every boot. Where the host forces cgroup v1
	// on the machine, the node image's kiln-cgroup-rw.service writes
	// "failCgroupV1: false" into it; on cgroup v2 it stays empty.
	KubeletConfigDir = "/run/kiln/kubelet.conf.d"
	// MachineConfigDir is the machine-config agent's state: what it applied,
	// the originals of files it replaced, the kubelet drop-in.
	MachineConfigDir = "/var/lib/kiln/machine-config"
	// MachineConfigState is the agent's record of what it applied; a
	// machine without it has nothing of a MachineConfig's.
	MachineConfigState = MachineConfigDir + "/state.json"
	// MachineConfigKubeletDropin is the lasting copy of the kubelet settings
	// of the node's MachineConfigs, which kubelet.service copies into
	// KubeletConfigDir as MachineConfigKubeletDropinName before it starts.
	MachineConfigKubeletDropin = MachineConfigDir + "/kubelet.conf"
	// MachineConfigKubeletDropinName is that drop-in's name in
	// KubeletConfigDir.
	MachineConfigKubeletDropinName = "50-machine-config.conf"
	// KubeletHealthz is the kubelet's health endpoint on the node's
	// loopback (healthzPort 10248).
	KubeletHealthz = "http://127.0.0.1:10248/healthz"
)

// Releases on a node: what the ssh platform merges into a host, and what
// kiln upgrade cluster stages on every node for its machine-config agent.
const (
	// ExtensionsDir is where systemd-sysext finds the ssh platform's node
	// payload, a directory named kiln-<release version>.
	ExtensionsDir = "/var/lib/extensions"
	// ReleasesDir holds the node payloads of releases that kiln upgrade
	// cluster stages on a node, one directory per release version, laid
	// out as the ssh platform's payload (the tree of a system extension).
	// The machine-config agent takes from there what the node's
	// DesiredRelease asks for: container images, the kubelet and, on a host
	// that merges the payload, the whole extension.
	ReleasesDir = "/var/lib/kiln/releases"
	// PayloadKubelet is the kubelet in a node payload's tree.
	PayloadKubelet = "usr/local/bin/kubelet"
	// PayloadImagesDir holds a node payload's container images, one
	// archive per component (<component>.tar).
	PayloadImagesDir = "usr/share/kiln/images"
)

// PayloadExtension is the name of the node payload's system extension of
// release version: its directory in ExtensionsDir and the suffix of its
// extension-release file.
func PayloadExtension(version string) string { return "kiln-" + version }

// PayloadCopy is where the machine-config agent builds a copy of a payload
// directory dir that it moves across file systems, before the copy takes
// dir's name: a hidden name beside it, which systemd-sysext ignores.
func PayloadCopy(dir string) string { return path.Join(path.Dir(dir), "."+path.Base(dir)+".copying") }

// PodRouteProtocol is the routing protocol number of the routes the node
// agent adds for the pod network (ip route ... proto 199), so that it, and
// a reset of the host, touch no other route.
const PodRouteProtocol = "199"

// The pod network on every node: the CNI config the node agent writes for
// the Node's podCIDR, and the bridge the CNI bridge plugin puts the pods
// on, which holds the pod CIDR's gateway address.
const (
	CNIConfig = "/etc/cni/net.d/10-kiln.conflist"
	PodBridge = "cni0"
)

// The machine-config server, on the bootstrap machine and on masters.
const (
	// MCSConfigDir holds the configs it serves (<role>.ign) and its
	// tls.crt and tls.key.
	MCSConfigDir = KilnConfigDir + "/mcs"
	// MCSPort is its port; pointer configs fetch
	// https://api-int.<cluster>:MCSPort/config/<role>.
	MCSPort = 22623
)

// The bootstrap machine.
const (
	// BootstrapManifestsDir holds the objects bootkube applies.
	BootstrapManifestsDir = "/opt/kiln/manifests"
	// BootstrapUserManifestsList names, one a line, the manifests of
	// BootstrapManifestsDir the user added; bootkube logs them.
	BootstrapUserManifestsList = "/opt/kiln/user-manifests"
	// MasterEtcdManifest is the masters' etcd static pod, which bootkube
	// completes for each member it adds.
	MasterEtcdManifest = "/opt/kiln/static-pods/etcd.yaml"
	// BootkubeDoneFile is written by bootkube when bootstrap is complete; its
	// unit does not start again once it exists.
	BootkubeDoneFile = "/opt/kiln/bootkube.done"
)

// Layout is the layout as a value, for templates: data/butane's units read
// it as {{ .Layout.MCSConfigDir }}.
type Layout struct {
	KilnBinary            string
	NodeEnvFile           string
	StaticPodDir          string
	PKIDir                string
	EtcdPKIDir            string
	KubeconfigDir         string
	BootstrapKubeconfig   string
	KubeletKubeconfig     string
	RoleLabel             string
	KubeletConfigDir      string
	MCSConfigDir          string
	MCSPort               int
	BootstrapManifestsDir string
	MasterEtcdManifest    string
	BootkubeDoneFile      string
	TrustBundleDir        string

	MachineConfigKubeletDropin     string
	MachineConfigKubeletDropinName string
}

// Values returns the layout of kiln's machines.
func Values() Layout {
	return Layout{
		KilnBinary:            KilnBinary,
		NodeEnvFile:           NodeEnvFile,
		StaticPodDir:          StaticPodDir,
		PKIDir:                PKIDir,
		EtcdPKIDir:            EtcdPKIDir,
		KubeconfigDir:         KubeconfigDir,
		BootstrapKubeconfig:   BootstrapKubeconfig,
		KubeletKubeconfig:     KubeletKubeconfig,
		RoleLabel:             RoleLabel,
		KubeletConfigDir:      KubeletConfigDir,
		MCSConfigDir:          MCSConfigDir,
		MCSPort:               MCSPort,
		BootstrapManifestsDir: BootstrapManifestsDir,
		MasterEtcdManifest:    MasterEtcdManifest,
		BootkubeDoneFile:      BootkubeDoneFile,
		TrustBundleDir:        TrustBundleDir,

		MachineConfigKubeletDropin:     MachineConfigKubeletDropin,
		MachineConfigKubeletDropinName: MachineConfigKubeletDropinName,
	}
}

// EnvFile renders env in the format of NodeEnvFile, as systemd's
// EnvironmentFile= reads it: KEY=value lines sorted by key, a value
// double-quoted (with \, " and $ escaped) when it holds blanks, quotes, a
// backslash, $, # or ;.
func EnvFile(env map[string]string) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(env)) {
		v := env[k]
		if strings.ContainsAny(v, " \t\"'\\$#;") {
			v = `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, `$`, `\$`).Replace(v) + `"`
		}
		b.WriteString(k + "=" + v + "\n")
	}
	return b.String()
}

// Sysctl is a kernel setting: its path below /proc/sys and its value.
type Sysctl struct{ Key, Value string }

// EtcdRestoreAside is where `kiln restore cluster` run keeps a master's
// etcd data of before it: inside etcd's data directory dataDir
// (EtcdDataDir), on the same filesystem as the data it was.
func EtcdRestoreAside(dataDir, run string) string {
	return path.Join(dataDir, "member.before-restore-"+run)
}

// KubeletSysctls are the global sysctls kubelet checks at start
// (setupKernelTunables), with the values it wants and sets where it can:
// the local platform shows them to a machine read-only, an ssh host's
// reset puts back what the host had.
func KubeletSysctls() []Sysctl {
	return []Sysctl{
		{"vm/overcommit_memory", "1"},
		{"vm/panic_on_oom", "0"},
		{"kernel/panic", "10"},
		{"kernel/panic_on_oops", "1"},
		{"kernel/keys/root_maxkeys", "1000000"},
		{"kernel/keys/root_maxbytes", "25000000"},
	}
}
