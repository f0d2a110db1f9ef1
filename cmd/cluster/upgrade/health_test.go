package upgrade

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestHealthyOnAHealthyCluster(t *testing.T) {
	l := newLive([]string{"master-0", "master-1", "master-2"}, []string{"worker-0"}, "v1.35.4", "3.5.35")
	if err := Healthy(observe(t, l, l.etcd)); err != nil {
		t.Fatal(err)
	}
}

func TestHealthyNamesEveryProblem(t *testing.T) {
	l := newLive([]string{"master-0", "master-1", "master-2"}, []string{"worker-0"}, "v1.35.4", "3.5.35")
	edit(l, "worker-0", func(n *corev1.Node) {
		n.Status.Conditions[0] = corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionUnknown,
			Reason: "NodeStatusUnknown", Message: "Kubelet stopped posting node status."}
	})
	edit(l, "kube-apiserver-master-1", func(p *corev1.Pod) {
		p.Status.Conditions[0].Status = corev1.ConditionFalse
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "kube-apiserver", RestartCount: 4,
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
			// FallbackToLogsOnError: the end of its log.
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1,
				Message: "I1128 server.go:150] Version: v1.36.3\nE1128 run.go:72] \"command failed\" err=\"cannot set feature gate X to false, feature is locked to true\"\n"}}}}
	})
	l.objects = removeObject(l.objects, "kube-scheduler-master-2")
	l.etcd[0].Status, l.etcd[0].Err = nil, errDown
	l.etcd[1].Status.Errors = []string{"memberID:101 alarm:NOSPACE"}
	l.etcd[2].Member.IsLearner = true

	err := Healthy(observe(t, l, l.etcd))
	var u *UnhealthyError
	if !errors.As(err, &u) {
		t.Fatalf("want an *UnhealthyError, got %v", err)
	}
	want := []string{
		"node worker-0: not Ready (NodeStatusUnknown: Kubelet stopped posting node status.)",
		"kube-system/kube-apiserver-master-1: not Ready (Running); kube-apiserver: CrashLoopBackOff, 4 restarts; " +
			`kube-apiserver last exited 1: E1128 run.go:72] "command failed" err="cannot set feature gate X to false, feature is locked to true"`,
		"master-2: no kube-scheduler pod",
		"etcd member master-0: no answer (context deadline exceeded)",
		"etcd member master-1: memberID:101 alarm:NOSPACE",
		"etcd member master-2: a learner (its join has not finished)",
	}
	if len(u.Problems) != len(want) {
		t.Errorf("want %d problems, got %q", len(want), u.Problems)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("missing %q in:\n%v", w, err)
		}
	}
}

func TestHealthyWithoutEtcdMembers(t *testing.T) {
	l := newLive([]string{"master-0"}, nil, "v1.35.4", "3.5.35")
	if err := Healthy(observe(t, l, nil)); err == nil || !strings.Contains(err.Error(), "etcd: no member listed") {
		t.Errorf("want the missing members named, got %v", err)
	}
}

func TestLastLineKeepsTheEndOfALongMessage(t *testing.T) {
	long := strings.Repeat("é", maxMessage)
	got := lastLine("first\n" + long + "\n\n")
	if !strings.HasPrefix(got, "…") || len(got) > maxMessage+len("…") || !strings.HasSuffix(got, "é") {
		t.Errorf("lastLine of a %d-byte line = %q (%d bytes)", len(long), got, len(got))
	}
	if got := lastLine("only line"); got != "only line" {
		t.Errorf("lastLine = %q", got)
	}
}
