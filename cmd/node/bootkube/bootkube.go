package bootkube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kiln-project/kiln/cmd/cluster/handover"
	"github.com/kiln-project/kiln/graph/atomicfile"
)

// Config configures a bootkube run.
type Config struct {
	Kubeconfig         string // admin kubeconfig for the local API server
	ManifestsDir       string // objects to apply
	UserManifestsList  string // names the manifests the user added, one a line (optional)
	EtcdPKIDir         string // etcd ca.crt and ca.key
	EtcdClientCert     string
	EtcdClientKey      string
	MasterEtcdManifest string // masters' etcd static pod with EtcdInitialClusterMarker
	InstallerImage     string // any image present on every node; the installer runs the kiln binary
	Masters            int    // how many masters the handoff waits for
	NodeName           string // the bootstrap machine's node (and etcd member) name
	DoneFile           string
	Kubectl            string
	Log                logrus.FieldLogger
	Poll               time.Duration // between checks; DefaultPoll when zero
	// Retiring the temporary control plane (retire.go); defaults when empty.
	StaticPodDir  string // the kubelet's static pods
	RetiredPodDir string // where retired static pods go
	APIAddress    string // the local API server, host:port
	// RetireFirst stops the temporary control plane and removes the
	// bootstrap etcd member as soon as every master's member votes, before
	// the masters' API servers are up (controlPlaneHardwareSpeed Slower;
	// retireFirst in retire.go).
	RetireFirst bool
	// EtcdMemberValidity is the lifetime of the member certificates it
	// issues for the masters (pki.leafValidity).
	EtcdMemberValidity time.Duration
}

// DefaultPoll is how often bootkube checks again while it waits. Each
// check is cheap (a node list and an etcd member list, or one readyz), and
// every step of the etcd growth (add a learner, promote it, the next
// master) waits for one, so a short interval takes idle seconds out of
// every master's join.
const DefaultPoll = time.Second

// Run performs the bootstrap until completion or ctx ends.
func Run(ctx context.Context, cfg Config) error {
	if cfg.Poll == 0 {
		cfg.Poll = DefaultPoll
	}
	restCfg, err := clientcmd.BuildConfigFromFlags("", cfg.Kubeconfig)
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	client, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return err
	}
	log := cfg.Log
	masters, err := loadMasters(cfg.DoneFile, log)
	if err != nil {
		return err
	}
	if masters == nil {
		if masters, err = grow(ctx, cfg, client); err != nil {
			return err
		}
	} else {
		log.Info("etcd already grown onto the masters; resuming the handover")
	}
	g := &grower{cfg: cfg}
	if cfg.RetireFirst {
		if err := poll(ctx, cfg.Poll, log, func() error { return g.retireFirst(ctx, masters) }); err != nil {
			return err
		}
	}
	if err := poll(ctx, cfg.Poll, log, func() error { return g.handOver(ctx, restCfg, masters) }); err != nil {
		return err
	}
	if cfg.DoneFile != "" {
		if err := atomicfile.Write(cfg.DoneFile, []byte(time.Now().UTC().Format(time.RFC3339)+"\n"), 0o644); err != nil {
			return err
		}
	}
	log.Info("bootstrap complete")
	return nil
}

// grow applies the manifests and grows etcd onto the masters; the masters
// are recorded so that a restarted bootkube (whose local etcd member may be
// gone by then) resumes with the handover.
func grow(ctx context.Context, cfg Config, client kubernetes.Interface) ([]master, error) {
	log := cfg.Log
	log.Info("waiting for the temporary control plane's API")
	if err := poll(ctx, cfg.Poll, log, func() error { return readyz(ctx, client.Discovery().RESTClient()) }); err != nil {
		return nil, err
	}
	if added := userManifests(cfg.UserManifestsList); len(added) > 0 {
		log.Infof("applying %d manifests you added with kiln's, in file-name order: %s", len(added), strings.Join(added, ", "))
	}
	log.Info("API up; applying manifests")
	if err := poll(ctx, cfg.Poll, log, func() error { return apply(ctx, cfg) }); err != nil {
		return nil, err
	}
	log.Infof("manifests applied from %s", cfg.ManifestsDir)
	g, err := newGrower(cfg, client)
	if err != nil {
		return nil, err
	}
	defer g.close()
	var masters []master
	if err := poll(ctx, cfg.Poll, log, func() error {
		var err error
		masters, err = g.step(ctx)
		return err
	}); err != nil {
		return nil, err
	}
	return masters, saveMasters(cfg.DoneFile, masters)
}

func mastersFile(doneFile string) string { return doneFile + ".masters" }

// saveMasters records masters for loadMasters, atomically: a torn record
// would otherwise stop every later run.
func saveMasters(doneFile string, masters []master) error {
	data, err := json.Marshal(masters)
	if err != nil {
		return err
	}
	return atomicfile.Write(mastersFile(doneFile), data, 0o644)
}

// loadMasters reads the masters recorded by grow; nil when there are none.
// A record that does not parse (torn by a crash while an older kiln wrote
// it without a rename) is removed and also yields nil: it was written
// before the handover began, so growing again from the still-present
// bootstrap member finds the same masters.
func loadMasters(doneFile string, log logrus.FieldLogger) ([]master, error) {
	name := mastersFile(doneFile)
	data, err := os.ReadFile(name)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var ms []master
	if err := json.Unmarshal(data, &ms); err != nil || len(ms) == 0 {
		log.Warnf("ignoring the unreadable masters record %s (%q); growing etcd again", name, data)
		if err := os.Remove(name); err != nil {
			return nil, err
		}
		return nil, nil
	}
	return ms, nil
}

// userManifests reads the list of manifests the user added; none when the
// file is absent.
func userManifests(list string) []string {
	data, err := os.ReadFile(list)
	if err != nil {
		return nil
	}
	return strings.Fields(string(data))
}

// apply server-side applies every manifest; it is safe to repeat.
func apply(ctx context.Context, cfg Config) error {
	cmd := exec.CommandContext(ctx, cfg.Kubectl, ApplyArgv(cfg.Kubeconfig, cfg.ManifestsDir)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("kubectl apply: %v: %s", err, out)
	}
	cfg.Log.Debugf("kubectl apply: %s", out)
	return nil
}

// ApplyArgv is the kubectl command line (after the program) that applies dir.
func ApplyArgv(kubeconfig, dir string) []string {
	return []string{"--kubeconfig", kubeconfig, "apply", "--server-side", "--force-conflicts",
		"--field-manager", "kiln-bootkube", "-f", dir}
}

func readyz(ctx context.Context, c rest.Interface) error {
	return c.Get().AbsPath("/readyz").Do(ctx).Error()
}

// poll calls f every interval until it succeeds or ctx ends; failures are
// retried. Progress (errNotYet) is logged at Info and other failures at
// Warn, each only when the message changes; when ctx ends, the error names
// the last failure.
func poll(ctx context.Context, every time.Duration, log logrus.FieldLogger, f func() error) error {
	var last error
	said := ""
	err := wait.PollUntilContextCancel(ctx, every, true, func(context.Context) (bool, error) {
		if last = f(); last == nil {
			return true, nil
		}
		if msg := last.Error(); msg != said {
			said = msg
			if isNotYet(last) {
				log.Info(msg)
			} else {
				log.Warn(msg)
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("%w (last error: %v)", err, last)
	}
	return nil
}

// markComplete records bootstrap-complete through client.
func markComplete(ctx context.Context, client kubernetes.Interface) error {
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: handover.CompleteConfigMap, Namespace: handover.CompleteNamespace},
		Data:       handover.CompleteData(),
	}
	_, err := client.CoreV1().ConfigMaps(handover.CompleteNamespace).Create(ctx, cm, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		_, err = client.CoreV1().ConfigMaps(handover.CompleteNamespace).Update(ctx, cm, metav1.UpdateOptions{})
	}
	return err
}

// nodeIP returns a node's InternalIP.
func nodeIP(n *corev1.Node) net.IP {
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			if ip := net.ParseIP(a.Address); ip != nil {
				return ip
			}
		}
	}
	return nil
}
