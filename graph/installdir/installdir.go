// Package installdir owns the layout of kiln's --dir: every path kiln reads
// or writes there is declared here, once, with what `kiln destroy cluster`
// does with it (Layout). Paths are slash-separated and relative to --dir;
// callers join them with filepath.FromSlash. It sits in the asset engine's
// folder and floor and imports nothing of kiln's, so the asset engine, the
// assets, the provisioners and the commands all name --dir's files
// through it.
package installdir

import (
	"io/fs"
	"path"
	"path/filepath"
	"strings"
)

// The user's input.
const (
	// InstallConfig is the install-config. When a later target consumes it,
	// it moves to Consumed; destroy puts it back.
	InstallConfig = "install-config.yaml"
)

// The asset engine's own files (package graph).
const (
	// State is the state file: every generated asset with its content hash.
	State = ".kiln_state.json"
	// Journal is the redo journal of a run writing --dir (0600; it holds
	// secrets). It exists only while a run writes, or after a run that was
	// killed or failed while writing: the next kiln finishes that run from
	// it before anything else (docs/crash-safety.md).
	Journal = ".kiln_journal.json"
	// Lock is the lock file a kiln writing --dir holds (flock(2)) and names
	// itself in. The kernel releases the lock when its holder dies, however
	// it dies, so a lock is never stale; the holder removes the file when it
	// finishes.
	Lock = ".kiln.lock"
	// Consumed holds the files a later target consumed (install-config,
	// manifests), kept for `destroy` and for the user.
	Consumed = ".kiln/consumed"
)

// What the assets write.
const (
	// Metadata is metadata.json: what destroy needs to find the cluster.
	Metadata = "metadata.json"
	// Auth is the folder of the kubeconfigs and the kubeadmin password.
	Auth = "auth"
	// AdminKubeconfig is the cluster administrator's kubeconfig.
	AdminKubeconfig = Auth + "/kubeconfig"
	// KubeletBootstrapKubeconfig is the kubelets' bootstrap kubeconfig.
	KubeletBootstrapKubeconfig = Auth + "/kubeconfig-kubelet-bootstrap"
	// LocalhostKubeconfig is the admin kubeconfig that reaches the API at
	// localhost, for use on a master.
	LocalhostKubeconfig = Auth + "/kubeconfig-localhost"
	// ControllerManagerKubeconfig and SchedulerKubeconfig are the control
	// plane components' kubeconfigs.
	ControllerManagerKubeconfig = Auth + "/kubeconfig-kube-controller-manager"
	SchedulerKubeconfig         = Auth + "/kubeconfig-kube-scheduler"
	// Manifests is the folder of the manifests bootkube applies.
	Manifests = "manifests"
	// StaticPods is the folder of the control plane's static pods, one
	// sub-folder per role.
	StaticPods = "static-pods"
)

// What the commands write after the assets.
const (
	// DebugLog is the debug log every command appends to.
	DebugLog = ".kiln.log"
	// Terraform is the Terraform working folder: CLI config, variables,
	// state and plan of each stage.
	Terraform = ".kiln/terraform"
	// BootstrapRecord records that bootstrap-complete was seen: after a
	// host reboot the API is down, and a create resumed then must still
	// know the bootstrap machine is gone for good.
	BootstrapRecord = ".kiln/bootstrap-complete"
	// Shape records the machines a cluster runs once `kiln scale cluster`
	// changed them, with the journal of a change under way; the
	// install-config in the state file is never changed.
	Shape = ".kiln/shape.json"
	// Hosts records the platform.ssh.hosts of an ssh cluster once a scale
	// changed them.
	Hosts = ".kiln/ssh-hosts.json"
	// UpgradeJournal is the journal of `kiln upgrade cluster`.
	UpgradeJournal = ".kiln/upgrade.json"
	// RestoreJournal records the `kiln restore cluster` under way: its
	// name and the backup it restores.
	RestoreJournal = ".kiln/restore.json"
	// RenewJournal records the `kiln certs renew` under way: its name and
	// the masters that have their new certificates.
	RenewJournal = ".kiln/renew.json"
	// RotateCAJournal records the `kiln certs rotate-ca` under way: its
	// name, phase, the nodes done in it, the old CAs' certificates and the
	// new CAs (with their keys, hence 0600 like every record).
	RotateCAJournal = ".kiln/rotate-ca.json"
	// UpgradeSnapshots holds the etcd snapshots an upgrade takes; each
	// holds every Secret of the cluster.
	UpgradeSnapshots = "upgrade"
	// LogBundlePrefix begins the name of each `kiln gather bootstrap`
	// bundle: <prefix><UTC time>.tar.gz.
	LogBundlePrefix = "log-bundle-"
	// Backups holds the archives of `kiln backup cluster` written without
	// --to; each holds every Secret of the cluster and its CAs' keys.
	Backups = "backups"
)

// Ignition returns the Ignition config of the machines of role
// ("bootstrap", "master" or "worker"): the bootstrap machine's full config,
// which holds private keys, and the masters' and workers' pointer configs,
// which hold their role's token; all are 0600.
func Ignition(role string) string { return role + ".ign" }

// Fate is what `kiln destroy cluster` does with a path once the cluster's
// machines are gone.
type Fate int

// The fates.
const (
	// Kept paths stay: the user's input, the debug log, the lock, the
	// consumed files and the gathered bundles.
	Kept Fate = iota
	// Removed paths are deleted (a link among them is removed itself,
	// never what it points to), so the same --dir can create a new
	// cluster.
	Removed
	// Restored paths are put back from Consumed when they were consumed.
	Restored
)

// Entry is one path of --dir's layout.
type Entry struct {
	// Path is slash-separated, relative to --dir; a folder's entry covers
	// everything under it.
	Path string
	// Destroy is what `kiln destroy cluster` does with it.
	Destroy Fate
	// Backup is whether `kiln backup cluster` archives it, when it is
	// there: what a cluster's --dir needs once restored (the state with
	// its CAs and keys, the records of the machines, the Terraform
	// state, the kubeconfigs), not what kiln makes again from the state
	// or writes for the user to read.
	Backup bool
}

// Layout returns every path of --dir's layout, each with its fate; a
// path inside a listed folder (AdminKubeconfig in Auth) is covered by the
// folder's entry.
func Layout() []Entry {
	return []Entry{
		{InstallConfig, Restored, true},
		{State, Removed, true},
		{Journal, Kept, false},
		{Lock, Kept, false},
		{Consumed, Kept, true},
		{Metadata, Removed, true},
		{Ignition("bootstrap"), Removed, false},
		{Ignition("master"), Removed, false},
		{Ignition("worker"), Removed, false},
		{Auth, Removed, true},
		{Manifests, Removed, true},
		{StaticPods, Removed, false},
		{DebugLog, Kept, false},
		{Terraform, Removed, true},
		{BootstrapRecord, Removed, true},
		{Shape, Removed, true},
		{Hosts, Removed, true},
		{UpgradeJournal, Removed, true},
		{UpgradeSnapshots, Removed, false},
		{RestoreJournal, Removed, false},
		{RenewJournal, Removed, false},
		{RotateCAJournal, Removed, true},
		{LogBundlePrefix + "*.tar.gz", Kept, false},
		{Backups, Kept, false},
	}
}

// RemovedByDestroy returns the paths of Layout that destroy removes, in
// Layout's order.
func RemovedByDestroy() []string {
	return paths(func(e Entry) bool { return e.Destroy == Removed })
}

// BackedUp returns the paths of Layout that `kiln backup cluster`
// archives, in Layout's order.
func BackedUp() []string {
	return paths(func(e Entry) bool { return e.Backup })
}

// paths returns the paths of the entries of Layout that keep says to,
// in Layout's order.
func paths(keep func(Entry) bool) []string {
	var out []string
	for _, e := range Layout() {
		if keep(e) {
			out = append(out, e.Path)
		}
	}
	return out
}

// Covers reports whether Layout declares p (slash-separated, relative to
// --dir): p is an entry, lies inside a folder's entry, is a folder on the
// way to an entry (.kiln), or matches an entry that is a pattern (the log
// bundles', path.Match).
func Covers(p string) bool {
	for _, e := range Layout() {
		if ok, _ := path.Match(e.Path, p); ok {
			return true
		}
		if strings.HasPrefix(p, e.Path+"/") || strings.HasPrefix(e.Path, p+"/") {
			return true
		}
	}
	return false
}

// Undeclared returns the paths under dir, relative and slash-separated,
// that Layout does not declare (Covers): what a command wrote there
// without declaring it, so that destroy would not know what to do with it.
func Undeclared(dir string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(dir, func(p string, _ fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		if rel = filepath.ToSlash(rel); !Covers(rel) {
			out = append(out, rel)
		}
		return nil
	})
	return out, err
}
