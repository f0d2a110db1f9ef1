package e2e

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kiln-project/kiln/ignition/nodelayout"
	"github.com/kiln-project/kiln/platforms/local/machine"
)

// backupSchedule and backupKeep are the HA cluster's backup: every two
// minutes, two archives kept on each master.
const (
	backupSchedule = "*/2 * * * *"
	backupKeep     = 2
)

// backupKey is a key pair of `kiln backup keygen`: the identity file, the
// recipients file holding its public key, and the key.
type backupKey struct {
	identity, recipients, public string
}

// newBackupKey makes a key pair with kiln backup keygen, outside --dir.
func newBackupKey(t *testing.T, kiln string) backupKey {
	t.Helper()
	keys := t.TempDir()
	k := backupKey{identity: filepath.Join(keys, "backup.key"), recipients: filepath.Join(keys, "recipients")}
	out, err := runKiln(t, kiln, time.Minute, "backup", "keygen", "--to", k.identity)
	if err != nil {
		t.Fatalf("backup keygen: %v\n%s", err, out)
	}
	k.public = strings.TrimSpace(out)
	if !strings.HasPrefix(k.public, "age1") || strings.Contains(k.public, "\n") {
		t.Fatalf("backup keygen printed %q, want one public key", out)
	}
	if err := os.WriteFile(k.recipients, []byte(k.public+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return k
}

// withBackupSchedule adds backup (backupSchedule, backupKeep, encrypted
// to public) to dir's install-config.
func withBackupSchedule(t *testing.T, dir, public string) {
	t.Helper()
	appendInstallConfig(t, dir, fmt.Sprintf("backup:\n  schedule: %q\n  keep: %d\n  encryptTo: [%s]\n", backupSchedule, backupKeep, public))
}

// takeScheduledBackup checks the schedule that install-config's backup
// made, then takes one backup now as an operator does (`kubectl create job
// --from=cronjob/kiln-etcd-backup`) and copies its archive off the master
// that took it into a file of the test's. Each master keeps at most
// backupKeep archives, all encrypted.
func takeScheduledBackup(ctx context.Context, t *testing.T, client kubernetes.Interface, infraID string, masters int) string {
	t.Helper()
	jobs := client.BatchV1().Jobs("kiln-system")
	cj, err := client.BatchV1().CronJobs("kiln-system").Get(ctx, "kiln-etcd-backup", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the backup CronJob: %v", err)
	}
	if cj.Spec.Schedule != backupSchedule {
		t.Errorf("the backup CronJob's schedule is %q, want %q", cj.Spec.Schedule, backupSchedule)
	}
	// The cluster has run for far more than two minutes: the schedule has
	// fired, and a backup succeeded.
	if cj.Status.LastSuccessfulTime == nil {
		list, _ := jobs.List(ctx, metav1.ListOptions{})
		var states []string
		for _, j := range list.Items {
			states = append(states, fmt.Sprintf("%s: %d succeeded, %d failed", j.Name, j.Status.Succeeded, j.Status.Failed))
		}
		t.Errorf("the backup CronJob (last scheduled %v) has no successful run; jobs: %q", cj.Status.LastScheduleTime, states)
	}

	started := time.Now()
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-backup-now", Namespace: "kiln-system",
			Annotations: map[string]string{"cronjob.kubernetes.io/instantiate": "manual"}},
		Spec: cj.Spec.JobTemplate.Spec,
	}
	if _, err := jobs.Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, 5*time.Minute, "the backup Job e2e-backup-now", func() (bool, string) {
		j, err := jobs.Get(ctx, job.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return j.Status.Succeeded > 0, fmt.Sprintf("%d active, %d failed", j.Status.Active, j.Status.Failed)
	})
	t.Logf("MEASURE scheduled backup Job (created by hand) complete in %s", time.Since(started).Round(time.Second))

	// The newest archive of all masters is the one just taken. A
	// scheduled run may be between its write and its pruning: a master
	// with too many archives is asked again.
	mgr := machine.NewManager(machine.Options{})
	archivesOn := func(m string) []string {
		out, err := mgr.Exec(ctx, m, "ls", "-A", nodelayout.BackupDir)
		if err != nil {
			return nil // a master that never ran a backup has no directory
		}
		var archives []string
		for _, n := range strings.Fields(string(out)) {
			if !strings.HasPrefix(n, infraID+"-") {
				continue // a run's temporary file
			}
			archives = append(archives, n)
			if !strings.HasSuffix(n, ".tar.gz.age") {
				t.Errorf("%s: %s in %s is not an encrypted archive", m, n, nodelayout.BackupDir)
			}
		}
		return archives
	}
	var newest, from string
	for i := range masters {
		m := fmt.Sprintf("%s-master-%d", infraID, i)
		var archives []string
		waitFor(t, ctx, time.Minute, fmt.Sprintf("%s to keep at most %d archives", m, backupKeep), func() (bool, string) {
			archives = archivesOn(m)
			return len(archives) <= backupKeep, fmt.Sprintf("%q", archives)
		})
		if len(archives) > 0 {
			if last := slices.Max(archives); last > newest {
				newest, from = last, m
			}
		}
	}
	if newest == "" {
		t.Fatalf("no master holds a backup in %s", nodelayout.BackupDir)
	}
	taken, err := time.Parse("20060102T150405Z", strings.TrimSuffix(strings.TrimPrefix(newest, infraID+"-"), ".tar.gz.age"))
	if err != nil || taken.Before(started.Add(-time.Minute)) {
		t.Fatalf("the newest archive %s on %s was not taken by the Job (%v)", newest, from, err)
	}
	data, err := mgr.Exec(ctx, from, "cat", path.Join(nodelayout.BackupDir, newest))
	if err != nil {
		t.Fatalf("%s: reading %s: %v", from, newest, err)
	}
	archive := filepath.Join(t.TempDir(), newest)
	if err := os.WriteFile(archive, data, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Logf("the backup Job's archive: %s on %s, %.1f MiB", newest, from, float64(len(data))/(1<<20))
	return archive
}
