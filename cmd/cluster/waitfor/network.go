package waitfor

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Prober is implemented by platforms whose nodes can run kiln's network
// probe (`kiln node probe`) in a pod.
type Prober interface {
	// ProbeContainer returns a container named name that runs the probe
	// with args, and the volumes it needs.
	ProbeContainer(name string, args ...string) (corev1.Container, []corev1.Volume)
}

// Objects of the network check, in kiln-system.
const (
	probeServer  = "kiln-probe-server"
	probeClient  = "kiln-probe-client"
	probeService = "kiln-probe"
	probeBody    = "kiln probe ok"
)

// probeRetry is how long the client pod retries each step in its process
// before it fails and the kubelet restarts it (with a back-off of 10 s and
// more, which the check's time used to show: 4-6 s when the first try
// passed, 17-22 s when it did not).
const probeRetry = 30 * time.Second

// NetworkCheck proves the pod network the way a user's workload needs it: a
// pod on a worker (a master when there is none) resolves kubernetes.default
// through cluster DNS and fetches from a ClusterIP Service whose pod runs on
// a master. The check's objects are removed afterwards.
func (w *Waiter) NetworkCheck(ctx context.Context, p Prober, timeout time.Duration) error {
	end := w.Progress.Start("Checking pod networking: cluster DNS and a ClusterIP Service from a worker")
	err := w.networkCheck(ctx, p, timeout)
	w.cleanupProbe()
	end(err)
	if err != nil {
		return fmt.Errorf("pod network check: %w", err)
	}
	w.Log.Info("Pod network works: DNS and a ClusterIP Service reached from a worker")
	return nil
}

func (w *Waiter) networkCheck(ctx context.Context, p Prober, timeout time.Duration) error {
	server, client, err := w.probeNodes(ctx)
	if err != nil {
		return err
	}
	w.cleanupProbe()
	pods := w.Client.CoreV1().Pods(installerNamespace)
	if _, err := pods.Create(ctx, probePod(p, probeServer, server, corev1.RestartPolicyAlways,
		"--serve=:8080", "--body="+probeBody), metav1.CreateOptions{}); err != nil {
		return err
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: probeService, Namespace: installerNamespace},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": probeServer},
			Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}
	if _, err := w.Client.CoreV1().Services(installerNamespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		return err
	}
	url := fmt.Sprintf("http://%s.%s.svc/", probeService, installerNamespace)
	if _, err := pods.Create(ctx, probePod(p, probeClient, client, corev1.RestartPolicyOnFailure,
		"--retry="+probeRetry.String(), "--resolve=kubernetes.default", "--get="+url), metav1.CreateOptions{}); err != nil {
		return err
	}
	// The client retries in its process until cluster DNS and the Service
	// answer (its first tries can come before the server pod is ready or
	// the Service's rules are on the client's node), and past probeRetry
	// through restartPolicy OnFailure.
	if err := w.until(ctx, timeout, func(ctx context.Context) (bool, string, error) {
		pod, err := pods.Get(ctx, probeClient, metav1.GetOptions{})
		if err != nil {
			return false, "probe pod not created", nil
		}
		return pod.Status.Phase == corev1.PodSucceeded, "probe pod " + string(pod.Status.Phase), nil
	}); err != nil {
		return err
	}
	logs, err := pods.GetLogs(probeClient, &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		return err
	}
	if !strings.Contains(string(logs), "kubernetes.default has address") || !strings.Contains(string(logs), probeBody) {
		return fmt.Errorf("probe pod on %s answered %q", client, logs)
	}
	return nil
}

// probeNodes picks a master for the server and a worker for the client.
func (w *Waiter) probeNodes(ctx context.Context) (server, client string, err error) {
	list, err := w.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", "", err
	}
	for _, n := range list.Items {
		if _, master := n.Labels[controlPlaneLabel]; master {
			if server == "" {
				server = n.Name
			}
		} else if client == "" {
			client = n.Name
		}
	}
	switch {
	case server == "" && client == "":
		return "", "", fmt.Errorf("no nodes")
	case server == "":
		server = client
	case client == "":
		client = server
	}
	return server, client, nil
}

func probePod(p Prober, name, node string, restart corev1.RestartPolicy, args ...string) *corev1.Pod {
	c, vols := p.ProbeContainer(name, args...)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: installerNamespace, Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{
			NodeName:      node,
			Tolerations:   []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			RestartPolicy: restart,
			Containers:    []corev1.Container{c},
			Volumes:       vols,
		},
	}
}

// cleanupProbe deletes the check's objects; missing ones are fine.
func (w *Waiter) cleanupProbe() {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, del := range []func() error{
		func() error {
			return w.Client.CoreV1().Pods(installerNamespace).Delete(ctx, probeClient, metav1.DeleteOptions{})
		},
		func() error {
			return w.Client.CoreV1().Pods(installerNamespace).Delete(ctx, probeServer, metav1.DeleteOptions{})
		},
		func() error {
			return w.Client.CoreV1().Services(installerNamespace).Delete(ctx, probeService, metav1.DeleteOptions{})
		},
	} {
		if err := del(); err != nil && !apierrors.IsNotFound(err) {
			w.Log.Debugf("network check cleanup: %v", err)
		}
	}
}
