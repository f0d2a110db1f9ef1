package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	ignconfig "github.com/coreos/ignition/v2/config/v3_3"
	ign "github.com/coreos/ignition/v2/config/v3_3/types"

	"github.com/kiln-project/kiln/assets/release"
	"github.com/kiln-project/kiln/platforms/local/machine"
	"github.com/kiln-project/kiln/platforms/nodeimage"
)

// TestNodeImageBoot is the node image smoke test: one machine booted from
// the node image with an Ignition config that installs kubelet (standalone,
// static pods) and static pods for single-node etcd and kube-apiserver.
// It proves that systemd reaches multi-user, containerd runs, the images
// were imported, and etcd and kube-apiserver answer over TLS from the host;
// then that destroying the machine leaves nothing behind.
//
// Building the node image from scratch takes tens of minutes: run with
// -timeout 90m, or with KILN_CACHE_DIR naming a cache that holds the image.
func TestNodeImageBoot(t *testing.T) {
	requireMachineHost(t)
	ctx, cancel := context.WithTimeout(context.Background(), 85*time.Minute)
	defer cancel()

	start := time.Now()
	img, err := nodeimage.Ensure(ctx, nodeimage.Options{Log: testLogger(t)})
	if err != nil {
		t.Fatalf("node image: %v", err)
	}
	t.Logf("node image %s at %s (ready after %s)", img.Hash, img.RootFS, time.Since(start).Round(time.Second))

	stateRoot, err := os.MkdirTemp("/var/lib", "kiln-e2e-nodeimage-")
	if err != nil {
		t.Fatal(err)
	}
	defer removeStateRoot(t, stateRoot)
	r := machine.ExecRunner{Log: testLogger(t)}
	suffix := fmt.Sprintf("%04x", os.Getpid()&0xffff)
	bridge := "kilnimg" + suffix
	subnet := freeSubnet(t, 8)
	if err := machine.EnsureBridge(ctx, r, bridge, subnet+"1/24"); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := machine.DeleteBridge(context.Background(), r, bridge); err != nil {
			t.Errorf("DeleteBridge: %v", err)
		}
	}()

	name := "img" + suffix + "-master-0"
	ip := subnet + "11"
	ca := newTestCA(t)
	pki := nodePKI(t, ca, ip)
	config := nodeIgnition(t, pki, ca, ip)

	m := machine.NewManager(machine.Options{StateRoot: stateRoot, Log: testLogger(t)})
	spec := machine.Spec{
		Name: name, Image: img.RootFS, Bridge: bridge, Address: ip + "/24",
		Hosts:    []machine.HostEntry{{IP: ip, Names: []string{"api-int.e2e.example", "api.e2e.example"}}},
		Ignition: config,
		Env:      map[string]string{"KILN_NODE_IP": ip, "KILN_NODE_NAME": name, "KILN_ROLE": "master"},
		CPUs:     2, MemoryBytes: 6 << 30,
	}
	destroyed := false
	defer func() {
		if t.Failed() {
			dumpMachine(t, m, stateRoot, name)
			for _, unit := range []string{"kiln-ignition", "kiln-images", "containerd", "kubelet"} {
				out, _ := m.Exec(context.Background(), name, "journalctl", "--no-pager", "-u", unit, "-n", "150")
				t.Logf("=== journal of %s ===\n%s", unit, tail(string(out), 20000))
			}
		}
		if !destroyed {
			_ = m.Destroy(context.Background(), name)
		}
	}()

	boot := time.Now()
	if err := m.Create(ctx, spec); err != nil {
		t.Fatalf("Create: %v", err)
	}
	bctx, bcancel := context.WithTimeout(ctx, 5*time.Minute)
	st, err := m.WaitBooted(bctx, name)
	bcancel()
	if err != nil {
		t.Fatalf("machine did not boot: %v", err)
	}
	t.Logf("MEASURE node image machine: multi-user (%s) %s after Create", st, time.Since(boot).Round(time.Millisecond))

	exec := func(argv ...string) (string, error) {
		out, err := m.Exec(ctx, name, argv...)
		return strings.TrimSpace(string(out)), err
	}
	for _, unit := range []string{"kiln-ignition.service", "containerd.service"} {
		if out, err := exec("systemctl", "is-active", unit); out != "active" {
			t.Errorf("%s is %q (%v)", unit, out, err)
		}
	}
	pause := release.Default().Image(release.Pause)
	waitFor(t, ctx, 4*time.Minute, "pause image imported into containerd (ctr -n k8s.io images ls)", func() (bool, string) {
		out, err := exec("ctr", "-n", "k8s.io", "images", "ls", "-q")
		return err == nil && strings.Contains(out, pause), out
	})
	t.Logf("MEASURE images imported %s after Create", time.Since(boot).Round(time.Millisecond))

	etcdClient := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: ca.tlsClient(t, pki["apiserver-etcd-client.crt"], pki["apiserver-etcd-client.key"]), DialContext: clusterDial}}
	waitFor(t, ctx, 6*time.Minute, fmt.Sprintf("etcd health over TLS at https://%s:2379/health", ip), func() (bool, string) {
		body, err := get(etcdClient, "https://"+ip+":2379/health")
		return err == nil && strings.Contains(body, `"health":"true"`), fmt.Sprint(body, err)
	})
	t.Logf("MEASURE etcd healthy %s after Create", time.Since(boot).Round(time.Millisecond))
	apiClient := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: ca.tlsClient(t, nil, nil), DialContext: clusterDial}}
	waitFor(t, ctx, 6*time.Minute, fmt.Sprintf("kube-apiserver /healthz over TLS at https://%s:6443/healthz", ip), func() (bool, string) {
		body, err := get(apiClient, "https://"+ip+":6443/healthz")
		return err == nil && body == "ok", fmt.Sprint(body, err)
	})
	t.Logf("MEASURE kube-apiserver healthy %s after Create", time.Since(boot).Round(time.Millisecond))
	inotify, _ := exec("sh", "-c", "ls -l /proc/[0-9]*/fd 2>/dev/null | grep -c inotify")
	t.Logf("MEASURE inotify instances inside the node: %s", inotify)

	info, err := m.Inspect(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	stop := time.Now()
	if err := m.Destroy(ctx, name); err != nil {
		t.Fatalf("Destroy: %v", err)
	}
	destroyed = true
	t.Logf("MEASURE destroy of the running node: %s", time.Since(stop).Round(time.Millisecond))
	for _, pid := range []int{info.PID, info.Leader} {
		if pid > 0 && hostProcessAlive(pid) {
			t.Errorf("process %d still runs", pid)
		}
	}
	if left := leftovers(t, stateRoot, []string{name}, []string{info.Veth}); len(left) > 0 {
		t.Errorf("left behind after Destroy:\n%s", strings.Join(left, "\n"))
	}
}

// waitFor polls check every 2 s until it is true or d passes.
func waitFor(t *testing.T, ctx context.Context, d time.Duration, what string, check func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(d)
	last := ""
	for {
		ok, detail := check()
		if ok {
			return
		}
		last = detail
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Fatalf("timed out after %s waiting for %s; last: %s", d, what, tail(last, 2000))
		}
		time.Sleep(2 * time.Second)
	}
}

func get(c *http.Client, url string) (string, error) {
	resp, err := c.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if resp.StatusCode != http.StatusOK {
		return string(body), fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	return strings.TrimSpace(string(body)), err
}

// nodePKI issues the certificates a single-node control plane needs.
func nodePKI(t *testing.T, ca *testCA, ip string) map[string][]byte {
	t.Helper()
	ips := []net.IP{net.ParseIP(ip), net.ParseIP("127.0.0.1"), net.ParseIP("10.96.0.1")}
	pki := map[string][]byte{"ca.crt": ca.certPEM}
	pki["etcd-server.crt"], pki["etcd-server.key"] = ca.issue(t, "etcd", nil, []string{"localhost"}, ips)
	pki["apiserver.crt"], pki["apiserver.key"] = ca.issue(t, "kube-apiserver", nil,
		[]string{"kubernetes", "kubernetes.default", "kubernetes.default.svc", "api-int.e2e.example", "localhost"}, ips)
	pki["apiserver-etcd-client.crt"], pki["apiserver-etcd-client.key"] = ca.issue(t, "kube-apiserver-etcd-client", nil, nil, nil)
	pki["sa.key"], pki["sa.pub"] = rsaKeyPair(t)
	return pki
}

// nodeIgnition builds the node's Ignition config (spec 3.3.0, what the
// node's Ignition accepts) and validates it with Ignition's own parser.
func nodeIgnition(t *testing.T, pki map[string][]byte, ca *testCA, ip string) []byte {
	t.Helper()
	yes := true
	file := func(path string, mode int, data []byte) ign.File {
		src := "data:;base64," + base64.StdEncoding.EncodeToString(data)
		return ign.File{
			Node:          ign.Node{Path: path, Overwrite: &yes},
			FileEmbedded1: ign.FileEmbedded1{Mode: &mode, Contents: ign.Resource{Source: &src}},
		}
	}
	cfg := ign.Config{Ignition: ign.Ignition{Version: "3.3.0"}}
	for n, data := range pki {
		mode := 0o644
		if strings.HasSuffix(n, ".key") {
			mode = 0o600
		}
		cfg.Storage.Files = append(cfg.Storage.Files, file("/etc/kubernetes/pki/"+n, mode, data))
	}
	cfg.Storage.Files = append(cfg.Storage.Files,
		file("/var/lib/kubelet/config.yaml", 0o644, []byte(kubeletConfig)),
		file("/etc/kubernetes/manifests/etcd.yaml", 0o644, []byte(etcdPod(ip))),
		file("/etc/kubernetes/manifests/kube-apiserver.yaml", 0o644, []byte(apiserverPod(ip))),
	)
	unit := kubeletUnit
	cfg.Systemd.Units = []ign.Unit{{Name: "kubelet.service", Enabled: &yes, Contents: &unit}}
	data, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, rpt, err := ignconfig.Parse(data); err != nil || rpt.IsFatal() {
		t.Fatalf("invalid Ignition config: %v\n%s", err, rpt.String())
	}
	return data
}

const kubeletUnit = `[Unit]
Description=kubelet (standalone, static pods)
Wants=containerd.service kiln-images.service
After=containerd.service kiln-images.service

[Service]
EnvironmentFile=/etc/kiln/node.env
ExecStart=/usr/local/bin/kubelet --config=/var/lib/kubelet/config.yaml --node-ip=${KILN_NODE_IP} --hostname-override=${KILN_NODE_NAME}
Restart=always
RestartSec=2

[Install]
WantedBy=multi-user.target
`

const kubeletConfig = `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
staticPodPath: /etc/kubernetes/manifests
cgroupDriver: systemd
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: unix:///run/containerd/containerd.sock
resolvConf: ""
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: false
authorization:
  mode: AlwaysAllow
`

func etcdPod(ip string) string {
	spec := release.Default().Spec(release.Etcd)
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: etcd
  namespace: kube-system
spec:
  hostNetwork: true
  containers:
  - name: etcd
    image: %[1]s
    imagePullPolicy: Never
    command:
    - %[2]s
    - --name=node0
    - --data-dir=/var/lib/etcd
    - --listen-client-urls=https://%[3]s:2379,https://127.0.0.1:2379
    - --advertise-client-urls=https://%[3]s:2379
    - --listen-peer-urls=http://127.0.0.1:2380
    - --initial-advertise-peer-urls=http://127.0.0.1:2380
    - --initial-cluster=node0=http://127.0.0.1:2380
    - --listen-metrics-urls=http://127.0.0.1:2381
    - --cert-file=/etc/kubernetes/pki/etcd-server.crt
    - --key-file=/etc/kubernetes/pki/etcd-server.key
    - --trusted-ca-file=/etc/kubernetes/pki/ca.crt
    - --client-cert-auth=true
    volumeMounts:
    - {name: pki, mountPath: /etc/kubernetes/pki, readOnly: true}
    - {name: data, mountPath: /var/lib/etcd}
  volumes:
  - {name: pki, hostPath: {path: /etc/kubernetes/pki, type: Directory}}
  - {name: data, hostPath: {path: /var/lib/etcd, type: DirectoryOrCreate}}
`, spec.Ref(), spec.Entrypoint(), ip)
}

func apiserverPod(ip string) string {
	spec := release.Default().Spec(release.KubeAPIServer)
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: kube-apiserver
  namespace: kube-system
spec:
  hostNetwork: true
  containers:
  - name: kube-apiserver
    image: %[1]s
    imagePullPolicy: Never
    command:
    - %[2]s
    - --advertise-address=%[3]s
    - --secure-port=6443
    - --etcd-servers=https://127.0.0.1:2379
    - --etcd-cafile=/etc/kubernetes/pki/ca.crt
    - --etcd-certfile=/etc/kubernetes/pki/apiserver-etcd-client.crt
    - --etcd-keyfile=/etc/kubernetes/pki/apiserver-etcd-client.key
    - --client-ca-file=/etc/kubernetes/pki/ca.crt
    - --tls-cert-file=/etc/kubernetes/pki/apiserver.crt
    - --tls-private-key-file=/etc/kubernetes/pki/apiserver.key
    - --service-account-issuer=https://kubernetes.default.svc
    - --service-account-key-file=/etc/kubernetes/pki/sa.pub
    - --service-account-signing-key-file=/etc/kubernetes/pki/sa.key
    - --service-cluster-ip-range=10.96.0.0/12
    - --authorization-mode=RBAC
    volumeMounts:
    - {name: pki, mountPath: /etc/kubernetes/pki, readOnly: true}
  volumes:
  - {name: pki, hostPath: {path: /etc/kubernetes/pki, type: Directory}}
`, spec.Ref(), spec.Entrypoint(), ip)
}
