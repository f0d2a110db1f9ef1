package manifests

import (
	"slices"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
)

// TestEtcdBackupCronJob: install-config's backup becomes one CronJob on
// the masters running kiln node etcd-backup with the schedule, keep
// (defaulted) and recipients, the etcd client's files alone mounted
// read-only and nothing else of the host's but the backup directory and kiln; without
// backup there is no file (TestManifests' inventory).
func TestEtcdBackupCronJob(t *testing.T) {
	const key = "age1ql3z7hjy54pw3hyww5ayyfg7zqgvc7w3j2elw8zmrj2kg5sfn9aqmcac8p"
	config := localConfig + "backup:\n  schedule: \"*/5 * * * *\"\n  encryptTo: [" + key + "]\n"
	files := renderAll(t, config)
	const p = "manifests/16-etcd-backup.yaml"
	objs := decodeAll(t, p, files[p])
	if len(objs) != 1 || objs[0].kind != "CronJob" {
		t.Fatalf("%s holds %d objects, want one CronJob", p, len(objs))
	}
	cj := objs[0].Object.(*batchv1.CronJob)
	if cj.Namespace != "kiln-system" || cj.Spec.Schedule != "*/5 * * * *" || cj.Spec.ConcurrencyPolicy != batchv1.ForbidConcurrent {
		t.Errorf("CronJob %s/%s schedule %q policy %s", cj.Namespace, cj.Name, cj.Spec.Schedule, cj.Spec.ConcurrencyPolicy)
	}
	pod := cj.Spec.JobTemplate.Spec.Template.Spec
	if pod.NodeSelector["node.kiln.dev/role"] != "master" || !pod.HostNetwork {
		t.Errorf("the Job's pod runs on %v, host network %v; want the masters' network", pod.NodeSelector, pod.HostNetwork)
	}
	c := pod.Containers[0]
	want := []string{"/usr/local/bin/kiln", "node", "etcd-backup", "--cluster=demo", "--platform=local", "--keep=7", "--encrypt-to=" + key}
	for _, w := range want {
		if !slices.Contains(c.Command, w) {
			t.Errorf("command %q lacks %q", c.Command, w)
		}
	}
	if id := flagValue(c.Command, "--infra-id"); !strings.HasPrefix(id, "demo-") {
		t.Errorf("--infra-id=%q", id)
	}
	if sc := c.SecurityContext; sc == nil || sc.Privileged != nil || len(sc.Capabilities.Drop) != 1 || !*sc.ReadOnlyRootFilesystem {
		t.Errorf("container security context %+v: want no capability, a read-only root", sc)
	}
	var mounts []string
	for _, m := range c.VolumeMounts {
		mounts = append(mounts, m.MountPath+map[bool]string{true: " ro", false: " rw"}[m.ReadOnly])
	}
	wantM := []string{"/etc/kubernetes/pki/etcd/ca.crt ro", "/etc/kubernetes/pki/apiserver-etcd-client.crt ro", "/etc/kubernetes/pki/apiserver-etcd-client.key ro",
		"/var/lib/kiln/backups rw", "/usr/local/bin/kiln ro"}
	if !slices.Equal(mounts, wantM) {
		t.Errorf("mounts %q, want %q", mounts, wantM)
	}
}
