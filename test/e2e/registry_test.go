package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kiln-project/kiln/assets/release"
	"github.com/kiln-project/kiln/platforms/local/provider"
	"github.com/kiln-project/kiln/platforms/local/registry"
)

// assertRegistry checks the registry add-on with a real OCI client on the
// host, skopeo (Debian's, a client kiln's code has no part in): it pushes
// an image to localhost:<port> over plain HTTP, and a pod of that name
// with imagePullPolicy Always runs, pulled through the bridge. A pod of
// kiln's own pause image with imagePullPolicy Always runs too: the nodes
// find it in the registry (create pushed it), as they cannot reach
// kiln.local. The bridge address refuses pushes.
func assertRegistry(t *testing.T, client kubernetes.Interface, infraID string) {
	skopeo, err := exec.LookPath("skopeo")
	if err != nil {
		t.Fatal("skopeo is not installed: `make deps` installs it (HOST_PACKAGES)")
	}
	addr, err := registry.ReadAddr(filepath.Join(provider.DefaultLBDir, infraID))
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("localhost:%d", addr.Port())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	// A pushed image: the pause image, saved from the registry into an
	// archive, then pushed from the archive under a new name.
	tag := fmt.Sprintf("t%d", time.Now().Unix())
	pushed := name + "/kiln-e2e/pause:" + tag
	archive := filepath.Join(t.TempDir(), "pause.tar")
	for _, args := range [][]string{
		{"copy", "--src-tls-verify=false", "docker://" + name + "/" + release.Default().Image(release.Pause), "docker-archive:" + archive + ":" + pushed},
		{"copy", "--dest-tls-verify=false", "docker-archive:" + archive, "docker://" + pushed},
	} {
		out, err := exec.CommandContext(ctx, skopeo, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("skopeo %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	for pod, image := range map[string]string{"registry-pushed": pushed, "registry-mirrored": release.Default().Image(release.Pause)} {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: pod, Namespace: "default"},
			Spec: corev1.PodSpec{
				Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
				Containers:  []corev1.Container{{Name: "c", Image: image, ImagePullPolicy: corev1.PullAlways}},
			},
		}
		if _, err := client.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		defer client.CoreV1().Pods("default").Delete(context.Background(), pod, metav1.DeleteOptions{})
		waitPod(ctx, t, client, "default", pod, func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
		evs, err := client.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + pod + ",reason=Pulled"})
		if err != nil || len(evs.Items) == 0 || !strings.Contains(evs.Items[0].Message, "Successfully pulled image") {
			t.Errorf("pod %s (%s, pull policy Always) runs, but no pull was recorded: %v %v", pod, image, evs, err)
		}
	}

	// The bridge address serves pulls only: pods and machines reach it.
	vip := addr.Addr().String()
	if !hostHolds(vip) {
		t.Fatalf("the host does not hold %s: not probing it", vip)
	}
	resp, err := http.Post("http://"+addr.String()+"/v2/kiln-e2e/pause/blobs/uploads/", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("a push to the bridge address %s got %s, want 405", addr, resp.Status)
	}
}

// assertRegistryKeeps checks that the cluster's registry runs and still
// holds kiln's pause image, which create pushed into it: its storage came
// through whatever happened since (kiln stop and start cluster, a host
// reboot).
func assertRegistryKeeps(t *testing.T, infraID string) {
	t.Helper()
	addr, err := registry.ReadAddr(filepath.Join(provider.DefaultLBDir, infraID))
	if err != nil {
		t.Fatal(err)
	}
	repo, tag, _ := strings.Cut(release.Default().Image(release.Pause), ":")
	u := "http://" + registry.PushAddr(addr) + "/v2/" + repo + "/manifests/" + tag
	req, err := http.NewRequest(http.MethodHead, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("the image registry does not answer: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("HEAD %s: %s; want the image create pushed", u, resp.Status)
	}
}
