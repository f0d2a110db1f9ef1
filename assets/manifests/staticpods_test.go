package manifests

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/kiln-project/kiln/assets/tls"
	"github.com/kiln-project/kiln/graph"
)

// installConfigYAML is a minimal install-config for the real engine.
const installConfigYAML = `apiVersion: kiln.dev/v1
metadata:
  name: demo
baseDomain: example.test
platform:
  local: {}
`

// openConfig is the real engine's store on a new --dir (returned) that
// holds config as its install-config.yaml.
func openConfig(t *testing.T, config string) (*graph.Store, string) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "install-config.yaml"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := graph.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return s, dir
}

// containerFlags returns the command-line flags of a rendered static pod's
// single container (kube-apiserver, etcd) as name -> value.
func containerFlags(t *testing.T, data []byte) map[string]string {
	t.Helper()
	var pod corev1.Pod
	if err := yaml.UnmarshalStrict(data, &pod); err != nil {
		t.Fatal(err)
	}
	if len(pod.Spec.Containers) != 1 {
		t.Fatalf("pod %s has %d containers", pod.Name, len(pod.Spec.Containers))
	}
	flags := map[string]string{}
	for _, arg := range pod.Spec.Containers[0].Command[1:] {
		name, value, _ := strings.Cut(strings.TrimPrefix(arg, "--"), "=")
		flags[name] = value
	}
	return flags
}

// TestAPIServerJWKSURICoveredByCertificate checks, for the bootstrap's and
// the masters' kube-apiserver, that the OIDC discovery document points at a
// JWKS URL the shared serving certificate is valid for: the default
// (https://<advertise address>:6443) is not in the certificate, so a pod
// validating its token against the discovery document failed (issue 8).
// The URL has the issuer's host, so a client that could fetch the discovery
// document from the issuer can fetch the keys too.
func TestAPIServerJWKSURICoveredByCertificate(t *testing.T) {
	s, _ := openConfig(t, installConfigYAML)
	bootstrap, master, serving := &BootstrapStaticPods{}, &MasterStaticPods{}, &tls.APIServer{}
	if err := s.Fetch(context.Background(), bootstrap, master, serving); err != nil {
		t.Fatal(err)
	}
	cert, err := serving.Certificate()
	if err != nil {
		t.Fatal(err)
	}
	for role, pods := range map[string]*staticPods{"bootstrap": &bootstrap.staticPods, "master": &master.staticPods} {
		data, ok := pods.File("kube-apiserver.yaml")
		if !ok {
			t.Fatalf("%s: no kube-apiserver.yaml", role)
		}
		flags := containerFlags(t, data)
		const want = "https://kubernetes.default.svc.cluster.local/openid/v1/jwks"
		if got := flags["service-account-jwks-uri"]; got != want {
			t.Errorf("%s: --service-account-jwks-uri = %q, want %q", role, got, want)
		}
		jwks, err := url.Parse(flags["service-account-jwks-uri"])
		if err != nil {
			t.Fatalf("%s: %v", role, err)
		}
		issuer, err := url.Parse(flags["service-account-issuer"])
		if err != nil {
			t.Fatalf("%s: %v", role, err)
		}
		if jwks.Scheme != "https" || jwks.Host != issuer.Host {
			t.Errorf("%s: JWKS URL %s is not https on the issuer's host %s", role, jwks, issuer.Host)
		}
		if err := cert.VerifyHostname(jwks.Hostname()); err != nil {
			t.Errorf("%s: the serving certificate does not cover the JWKS URL: %v", role, err)
		}
	}
}

// roleFlags renders the bootstrap's and the masters' static pods and returns
// the command-line flags of file's container for each role.
func roleFlags(t *testing.T, config, file string) map[string]map[string]string {
	t.Helper()
	bootstrap, master := &BootstrapStaticPods{}, &MasterStaticPods{}
	s, _ := openConfig(t, config)
	if err := s.Fetch(context.Background(), bootstrap, master); err != nil {
		t.Fatal(err)
	}
	flags := map[string]map[string]string{}
	for role, pods := range map[string]*staticPods{"bootstrap": &bootstrap.staticPods, "master": &master.staticPods} {
		data, ok := pods.File(file)
		if !ok {
			t.Fatalf("%s: no %s", role, file)
		}
		flags[role] = containerFlags(t, data)
	}
	return flags
}

// TestEtcdStrictReconfigCheck: only the bootstrap member, to which bootkube
// adds the masters' learners, runs without etcd's strict reconfiguration
// check; the masters' members keep it (they guard every removal).
func TestEtcdStrictReconfigCheck(t *testing.T) {
	flags := roleFlags(t, installConfigYAML, "etcd.yaml")
	for role, want := range map[string]string{"bootstrap": "false", "master": ""} {
		if got := flags[role]["strict-reconfig-check"]; got != want {
			t.Errorf("%s: etcd --strict-reconfig-check = %q, want %q", role, got, want)
		}
	}
}

// TestBootstrapOnlyFlags: the bootstrap machine's controller manager and
// scheduler, the only candidates there, hold their leases through 40 s of a
// slow API, and its API server waits 10 s for its etcd's health; the
// masters' keep the defaults (a failed master's lease passes on after
// 15 s).
func TestBootstrapOnlyFlags(t *testing.T) {
	leader := map[string]string{"leader-elect-lease-duration": "60s", "leader-elect-renew-deadline": "40s", "leader-elect-retry-period": "2s"}
	for file, want := range map[string]map[string]string{
		"kube-controller-manager.yaml": leader,
		"kube-scheduler.yaml":          leader,
		"kube-apiserver.yaml":          {"etcd-healthcheck-timeout": "10s", "etcd-readycheck-timeout": "10s"},
	} {
		flags := roleFlags(t, installConfigYAML, file)
		for flag, value := range want {
			if got := flags["bootstrap"][flag]; got != value {
				t.Errorf("bootstrap %s: --%s = %q, want %q", file, flag, got, value)
			}
			if got, ok := flags["master"][flag]; ok {
				t.Errorf("master %s: --%s = %q, want the default (no flag)", file, flag, got)
			}
		}
	}
}

// TestSlowerControlPlane: controlPlaneHardwareSpeed Slower gives every etcd
// member the slower timing, every API server 10 s for its etcd checks and
// every controller manager and scheduler the bootstrap's leader election;
// Standard (the default) leaves the masters' on the defaults.
func TestSlowerControlPlane(t *testing.T) {
	checks := map[string]string{"etcd-healthcheck-timeout": "10s", "etcd-readycheck-timeout": "10s"}
	timing := map[string]string{"heartbeat-interval": "500", "election-timeout": "5000"}
	leader := map[string]string{"leader-elect-lease-duration": "60s", "leader-elect-renew-deadline": "40s", "leader-elect-retry-period": "2s"}
	for _, speed := range []string{"Standard", "Slower"} {
		config := installConfigYAML + "controlPlaneHardwareSpeed: " + speed + "\n"
		for file, want := range map[string]map[string]string{"etcd.yaml": timing, "kube-apiserver.yaml": checks,
			"kube-controller-manager.yaml": leader, "kube-scheduler.yaml": leader} {
			flags := roleFlags(t, config, file)
			for _, role := range []string{"bootstrap", "master"} {
				// The temporary control plane's etcd checks and leader
				// election are the slower ones at either speed.
				slower := speed == "Slower" || role == "bootstrap" && file != "etcd.yaml"
				for flag, value := range want {
					got, ok := flags[role][flag]
					if slower && got != value {
						t.Errorf("%s, %s %s: --%s = %q, want %q", speed, role, file, flag, got, value)
					}
					if !slower && ok {
						t.Errorf("%s, %s %s: --%s = %q, want the default (no flag)", speed, role, file, flag, got)
					}
				}
			}
		}
	}
}

// TestSlowerStartupAllowance: with controlPlaneHardwareSpeed Slower every
// control-plane container may take 20 min to start (600 probes 2 s apart)
// before its startup probe restarts it; 5 min otherwise.
func TestSlowerStartupAllowance(t *testing.T) {
	for speed, want := range map[string]int32{"Standard": 150, "Slower": 600} {
		bootstrap, master := &BootstrapStaticPods{}, &MasterStaticPods{}
		s, _ := openConfig(t, installConfigYAML+"controlPlaneHardwareSpeed: "+speed+"\n")
		if err := s.Fetch(context.Background(), bootstrap, master); err != nil {
			t.Fatal(err)
		}
		for role, pods := range map[string]*staticPods{"bootstrap": &bootstrap.staticPods, "master": &master.staticPods} {
			for _, file := range []string{"etcd.yaml", "kube-apiserver.yaml", "kube-controller-manager.yaml", "kube-scheduler.yaml"} {
				data, _ := pods.File(file)
				var pod corev1.Pod
				if err := yaml.UnmarshalStrict(data, &pod); err != nil {
					t.Fatal(err)
				}
				p := pod.Spec.Containers[0].StartupProbe
				if p == nil || p.FailureThreshold != want || p.PeriodSeconds != 2 {
					t.Errorf("%s, %s %s: startup probe %+v, want %d failures 2 s apart", speed, role, file, p, want)
				}
			}
		}
	}
}
