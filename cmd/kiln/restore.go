package main

import (
	"errors"

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
written to the cluster since the backup is lost. An encrypted archive (kiln backup cluster
--encrypt-to) needs --identity. Run it again after an interrupt: it goes on with the same restore.
See docs/backup.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.From == "" {
				return exitcode.With(exitcode.Input, errors.New("--from: the backup archive to restore is required"))
			}
			s, err := o.openCluster(cmd.Context(), install.Timeouts{}, 0)
			if err != nil {
				return err
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
