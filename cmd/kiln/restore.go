package main

import (
	"context"
	"errors"
	"time"

	"github.com/spf13/cobra"

	"github.com/kiln-project/kiln/cmd/cluster/exitcode"
	"github.com/kiln-project/kiln/cmd/cluster/install"
	"github.com/kiln-project/kiln/cmd/cluster/restore"
	"github.com/kiln-project/kiln/cmd/cluster/scale"
)

// newRestoreCmd is `kiln restore`: bring a cluster back from a backup.
func newRestoreCmd(o *rootOptions) *cobra.Command {
	cmd := &cobra.Command{Use: "restore", Short: "Bring a cluster back from a backup of kiln backup cluster", Args: cobra.NoArgs}
	var opts restore.Options
	cluster := &cobra.Command{
		Use:   "cluster",
		Short: "Restore the cluster's etcd from a backup archive, when etcd lost quorum or its data",
		Long: `Restore the etcd of --dir's cluster from the backup archive --from (kiln backup cluster), for a
cluster whose etcd lost quorum or its data. The archive is checked whole first. Every master's etcd
and API server stop and keep their old data in /var/lib/etcd/member.before-restore-<run>; the first master
restores the snapshot as a new one-member cluster and starts its API server; the other masters join
it again as learners, promoted once caught up, as kiln scale cluster finishes a join. Everything
written to the cluster since the backup is lost.

In a --dir that holds no cluster (after kiln destroy cluster, or a new one), it first creates the
backup's cluster again on new machines, with the backup's names, addresses, CAs and service account
key and new leaf certificates, then restores etcd on them: disaster recovery onto new machines.
Nodes of machines it does not re-create (workers a scale added) are deleted. An encrypted archive (kiln backup cluster
--encrypt-to) needs --identity. Run it again after an interrupt: it goes on with the same restore.
See docs/backup.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.From == "" {
				return exitcode.With(exitcode.Input, errors.New("--from: the backup archive to restore is required"))
			}
			s, err := o.recreateForRestore(cmd.Context(), opts)
			if err != nil {
				return err
			}
			if s == nil {
				if s, err = o.openCluster(cmd.Context(), install.Timeouts{}, 0); err != nil {
					return err
				}
			}
			return restore.Cluster(cmd.Context(), s.cluster, s.prov, opts, o.log, o.status, o.stdout)
		},
	}
	cluster.Annotations = map[string]string{lockAnnotation: ""}
	cluster.Flags().StringVar(&opts.From, "from", "", "the backup archive (kiln backup cluster) to restore")
	cluster.Flags().StringVar(&opts.Identity, "identity", "", "the age identity file (0600) that decrypts an encrypted archive (kiln backup keygen)")
	cluster.Flags().DurationVar(&opts.Timeout, "timeout", scale.DefaultJoinTimeout, "how long to wait for the API, each master's join and every node Ready")
	cmd.AddCommand(cluster)
	return cmd
}

// recreateForRestore creates the backup's cluster again when --dir holds
// none (restore.Recreates), or finishes the re-creation of the restore
// under way, and returns its session; nil when the restore is of the
// cluster --dir holds.
func (o *rootOptions) recreateForRestore(ctx context.Context, opts restore.Options) (*session, error) {
	j, pending, err := restore.Pending(o.dir)
	if err != nil {
		return nil, err
	}
	recreate, seed, err := restore.Recreates(o.dir, j, pending)
	if err != nil || !recreate || j.Created {
		return nil, err
	}
	if seed {
		if j, err = restore.Seed(o.dir, opts, j, pending, time.Now(), o.stdout); err != nil {
			return nil, err
		}
		if err := o.reissue(ctx, restore.Reissued()); err != nil {
			return nil, err
		}
		j.Configs = true
		if err := j.Save(o.dir); err != nil {
			return nil, err
		}
	}
	s, err := o.createCluster(ctx, nil, install.Timeouts{})
	if err != nil {
		return nil, err
	}
	j.Created = true
	return s, j.Save(o.dir)
}
