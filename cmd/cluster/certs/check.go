package certs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/sirupsen/logrus"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kiln-project/kiln/cmd/cluster/exitcode"
	"github.com/kiln-project/kiln/graph/installdir"
	"github.com/kiln-project/kiln/platforms/netroute"
)

// Options configure CheckExpiration.
type Options struct {
	// Dir is the --dir to report on; it is only read.
	Dir string
	// Nodes also reports the kubelets' certificates through the API, with
	// the admin kubeconfig of Dir, and what each master serves.
	Nodes bool
	// Timeout bounds each API request and each TLS handshake.
	Timeout time.Duration
	// Now is the time expiry is measured from.
	Now time.Time
	// Log receives warnings (e.g. no admin kubeconfig).
	Log logrus.FieldLogger
	// Dial opens every connection to the cluster (its API, each kubelet):
	// the cluster's route policy (netroute), so a node's address is dialed
	// only through a route of the cluster's own.
	Dial netroute.Dialer
}

// CheckExpiration prints the table of every certificate of o.Dir and, with
// o.Nodes, of the nodes. The table is printed even when the cluster cannot
// be reached; that error is returned after it.
func CheckExpiration(ctx context.Context, w io.Writer, o Options) error {
	if _, err := os.Stat(o.Dir); err != nil {
		return exitcode.With(exitcode.Input, fmt.Errorf("--dir: %w", err))
	}
	entries, err := FromDir(o.Dir)
	if err != nil {
		return err
	}
	var clusterErr error
	if o.Nodes {
		var nodes []Entry
		nodes, clusterErr = fromAdminKubeconfig(ctx, o)
		entries = append(entries, nodes...)
	}
	if err := WriteTable(w, entries, entries, o.Now); err != nil {
		return err
	}
	return clusterErr
}

// fromAdminKubeconfig reads the nodes' certificates with Dir's admin
// kubeconfig; without one there is nothing to report (a warning).
func fromAdminKubeconfig(ctx context.Context, o Options) ([]Entry, error) {
	path := filepath.Join(o.Dir, filepath.FromSlash(installdir.AdminKubeconfig))
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		o.Log.Warnf("no %s in --dir: the nodes' certificates are not shown", installdir.AdminKubeconfig)
		return nil, nil
	}
	rc, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", installdir.AdminKubeconfig, err)
	}
	rc.Timeout = o.Timeout
	rc.Dial = o.Dial.DialContext
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", installdir.AdminKubeconfig, err)
	}
	nodes, err := FromCluster(ctx, client, o.Dial, o.Timeout, MasterPorts())
	if err != nil {
		return nil, fmt.Errorf("nodes' certificates: %w", err)
	}
	return nodes, nil
}
