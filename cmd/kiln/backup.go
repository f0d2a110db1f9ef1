package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/kiln-project/kiln/cmd/cluster/backup"
	"github.com/kiln-project/kiln/cmd/cluster/exitcode"
	"github.com/kiln-project/kiln/cmd/cluster/install"
)

// newBackupCmd is `kiln backup`: archive a running cluster's etcd and
// --dir, and check such an archive.
func newBackupCmd(o *rootOptions) *cobra.Command {
	cmd := &cobra.Command{Use: "backup", Short: "Back up a running cluster: etcd's snapshot and what its --dir needs", Args: cobra.NoArgs}
	var opts backup.Options
	var encryptTo, identity string
	cluster := &cobra.Command{
		Use:   "cluster",
		Short: "Archive etcd's snapshot and --dir's state, records and kubeconfigs into one 0600 file",
		Long: `Take a snapshot of the cluster's etcd from the members on its masters (the API server's etcd
client certificate of --dir, etcd's integrity check on the stream) and archive it with the files
of --dir the cluster's --dir needs once restored: the state file (the CAs and their keys, every
certificate), metadata.json, auth/, the records of the machines (.kiln/), the Terraform state,
install-config.yaml and what was consumed. backup.json, the archive's first member, names the
cluster and holds every member's size and SHA-256. The archive is a gzip-compressed tar, 0600,
written atomically to --to, or to --dir/backups/<infra ID>-<UTC time>.tar.gz, which destroy keeps.
It holds every Secret of the cluster and the keys of its CAs: keep it as you keep them, or encrypt
it with --encrypt-to, a file of age public keys (kiln backup keygen, or age-keygen): then only
their private keys read it (kiln backup check --identity, kiln restore cluster --identity), and
kiln names it <...>.tar.gz.age. See docs/backup.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if encryptTo != "" {
				rs, err := backup.ReadRecipients(encryptTo)
				if err != nil {
					return exitcode.With(exitcode.Input, fmt.Errorf("--encrypt-to: %w", err))
				}
				opts.Recipients = rs
			}
			s, err := o.openCluster(cmd.Context(), install.Timeouts{}, 0)
			if err != nil {
				return err
			}
			if _, _, err := backup.Cluster(cmd.Context(), s.cluster, s.prov, opts, o.stdout); err != nil {
				return exitcode.With(exitcode.Install, err)
			}
			return nil
		},
	}
	cluster.Annotations = map[string]string{lockAnnotation: ""}
	cluster.Flags().StringVar(&opts.To, "to", "", "the archive's path (default --dir/backups/<infra ID>-<UTC time>.tar.gz[.age])")
	cluster.Flags().StringVar(&encryptTo, "encrypt-to", "", "encrypt the archive to the age public keys in this file (one \"age1...\" per line)")
	check := &cobra.Command{
		Use:   "check FILE",
		Short: "Read a backup archive whole and check every member against its manifest",
		Long: `Read the backup archive FILE whole: every member must be the one its manifest (backup.json)
names, of its size and SHA-256, none missing and none extra, and etcd's snapshot must pass etcd's
integrity check. Prints the manifest's summary; exits non-zero at the first difference.
An encrypted archive is decrypted with --identity. It reads FILE only, and neither --dir nor
the cluster.`,
		Args:        cobra.ExactArgs(1),
		Annotations: map[string]string{debugLogAnnotation: debugLogNone},
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := backup.ReadFile(args[0], identity, backup.Sinks{})
			if err != nil {
				return exitcode.With(exitcode.Input, err)
			}
			fmt.Fprintf(o.stdout, "%s: cluster %s (%s, platform %s, Kubernetes %s), taken %s: etcd snapshot %d bytes and %d files of --dir, all as the manifest says\n",
				args[0], m.Cluster, m.InfraID, m.Platform, m.Kubernetes, m.TakenAt.Format("2006-01-02 15:04:05 UTC"), m.Snapshot.Size, len(m.Files))
			return nil
		},
	}
	check.Flags().StringVar(&identity, "identity", "", "the age identity file (0600) that decrypts an encrypted archive")
	var keyTo string
	keygen := &cobra.Command{
		Use:   "keygen --to FILE",
		Short: "Write a new age identity (0600) for encrypted backups and print its public key",
		Long: `Write a new age X25519 identity to FILE (0600; an existing FILE is never replaced) and print its
public key, the line to put in the file kiln backup cluster --encrypt-to reads. Keep FILE away from
the backups and from --dir: whoever holds it reads every backup encrypted to its key. age-keygen
writes the same format. It touches neither --dir nor the cluster.`,
		Args:        cobra.NoArgs,
		Annotations: map[string]string{debugLogAnnotation: debugLogNone},
		RunE: func(cmd *cobra.Command, _ []string) error {
			if keyTo == "" {
				return exitcode.With(exitcode.Input, errors.New("--to: the identity file to write is required"))
			}
			recipient, err := backup.WriteIdentity(keyTo)
			if err != nil {
				return exitcode.With(exitcode.Input, fmt.Errorf("--to: %w", err))
			}
			fmt.Fprintf(o.stdout, "%s\n", recipient)
			return nil
		},
	}
	keygen.Flags().StringVar(&keyTo, "to", "", "the identity file to write")
	cmd.AddCommand(cluster, check, keygen)
	return cmd
}
