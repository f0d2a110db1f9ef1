package installconfig

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net/netip"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kiln-project/kiln/assets/installconfig/types"
	"github.com/kiln-project/kiln/assets/installconfig/types/configs"
	"github.com/kiln-project/kiln/assets/installconfig/types/local"
	"github.com/kiln-project/kiln/assets/installconfig/types/local/localconfig"
	"github.com/kiln-project/kiln/assets/installconfig/types/none"
	"github.com/kiln-project/kiln/assets/installconfig/types/none/noneconfig"
)

// testPlatforms are the real platforms on a fake host that has eth0 on
// 192.0.2.0/24 and a default route.
func testPlatforms() []configs.Platform {
	host := func() ([]localconfig.HostNetwork, error) {
		return []localconfig.HostNetwork{
			{Prefix: netip.MustParsePrefix("0.0.0.0/0"), Device: "eth0"},
			{Prefix: netip.MustParsePrefix("192.0.2.0/24"), Device: "eth0"},
			{Prefix: netip.MustParsePrefix("127.0.0.0/8"), Device: "lo"},
		}, nil
	}
	return []configs.Platform{&localconfig.Config{HostNetworks: host}, noneconfig.Config{}}
}

// defaulted returns testdata/minimal.yaml parsed and defaulted.
func defaulted(t *testing.T) *types.Config {
	t.Helper()
	data, err := os.ReadFile("testdata/minimal.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	SetDefaults(c, testPlatforms())
	return c
}

// fieldErr is what the tests compare: an error's type and field.
type fieldErr struct {
	Type  field.ErrorType
	Field string
}

func asData(errs field.ErrorList) []fieldErr {
	out := make([]fieldErr, len(errs))
	for i, e := range errs {
		out[i] = fieldErr{e.Type, e.Field}
	}
	return out
}

func sshKey(t *testing.T) string {
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	k, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(k))) + " user@host"
}

func caPEM(t *testing.T) string {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ca"},
		NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, pub, priv)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

func i64(v int64) *int64 { return &v }

func TestValidate(t *testing.T) {
	inv, req, ns, tl, forb, dup, many := field.ErrorTypeInvalid, field.ErrorTypeRequired, field.ErrorTypeNotSupported,
		field.ErrorTypeTooLong, field.ErrorTypeForbidden, field.ErrorTypeDuplicate, field.ErrorTypeTooMany
	key, ca := sshKey(t), caPEM(t)
	useNone := func(c *types.Config) { c.Platform = types.Platform{None: &none.Platform{}} }
	tests := []struct {
		name   string
		mutate func(c *types.Config)
		want   []fieldErr
	}{
		{"minimal config is valid", func(*types.Config) {}, nil},
		{"everything optional set and valid", func(c *types.Config) {
			c.SSHKey = key + "\n" + key
			c.PullSecret = `{"auths":{"registry.example.com":{"auth":"dXNlcjpwYXNz"}}}`
			c.AdditionalTrustBundle = ca + ca
			c.Proxy = &types.Proxy{HTTPProxy: "http://proxy:3128", HTTPSProxy: "https://u:p@proxy:3129",
				NoProxy: "*, .example.com,10.0.0.0/8, 1.2.3.4,internal"}
			c.ControlPlane.Replicas = i64(5)
			c.Compute[0].Replicas = i64(0)
			c.ControlPlane.Platform.Local = &local.MachinePool{CPUs: 1.5, MemoryMiB: 4096}
		}, nil},
		{"single master", func(c *types.Config) { c.ControlPlane.Replicas = i64(1) }, nil},
		{"apiVersion missing", func(c *types.Config) { c.APIVersion = "" }, []fieldErr{{req, "apiVersion"}}},
		{"apiVersion wrong", func(c *types.Config) { c.APIVersion = "v1" }, []fieldErr{{ns, "apiVersion"}}},
		{"name missing", func(c *types.Config) { c.Metadata.Name = "" }, []fieldErr{{req, "metadata.name"}}},
		{"name not a DNS label", func(c *types.Config) { c.Metadata.Name = "Dev_1" }, []fieldErr{{inv, "metadata.name"}}},
		{"name too long", func(c *types.Config) { c.Metadata.Name = strings.Repeat("a", MaxNameLength+1) }, []fieldErr{{tl, "metadata.name"}}},
		{"baseDomain missing", func(c *types.Config) { c.BaseDomain = "" }, []fieldErr{{req, "baseDomain"}}},
		{"baseDomain invalid", func(c *types.Config) { c.BaseDomain = "exa mple.com" }, []fieldErr{{inv, "baseDomain"}}},
		{"API name too long", func(c *types.Config) { c.BaseDomain = strings.Repeat(strings.Repeat("a", 60)+".", 4) + "com" },
			[]fieldErr{{inv, "baseDomain"}}},
		{"controlPlane name", func(c *types.Config) { c.ControlPlane.Name = "control" }, []fieldErr{{ns, "controlPlane.name"}}},
		{"controlPlane even replicas", func(c *types.Config) { c.ControlPlane.Replicas = i64(2) }, []fieldErr{{inv, "controlPlane.replicas"}}},
		{"controlPlane 7 replicas", func(c *types.Config) { c.ControlPlane.Replicas = i64(7) }, []fieldErr{{inv, "controlPlane.replicas"}}},
		{"compute name", func(c *types.Config) { c.Compute[0].Name = "infra" }, []fieldErr{{ns, "compute[0].name"}}},
		{"compute duplicate", func(c *types.Config) { c.Compute = append(c.Compute, c.Compute[0]) }, []fieldErr{{dup, "compute[1].name"}}},
		{"compute negative replicas", func(c *types.Config) { c.Compute[0].Replicas = i64(-1) }, []fieldErr{{inv, "compute[0].replicas"}}},
		{"pool section of another platform", func(c *types.Config) {
			useNone(c)
			c.ControlPlane.Platform.Local = &local.MachinePool{}
		}, []fieldErr{{forb, "controlPlane.platform.local"}}},
		{"networkType", func(c *types.Config) { c.Networking.NetworkType = "Calico" }, []fieldErr{{ns, "networking.networkType"}}},
		{"networkType KilnVXLAN", func(c *types.Config) { c.Networking.NetworkType = types.NetworkTypeKilnVXLAN }, nil},
		{"egress", func(c *types.Config) { c.Networking.Egress = "Open" }, []fieldErr{{ns, "networking.egress"}}},
		{"egress None", func(c *types.Config) { c.Networking.Egress = types.EgressNone }, nil},
		{"pki.leafValidity 90 days", func(c *types.Config) { c.PKI = &types.PKI{LeafValidity: "2160h"} }, nil},
		{"pki.leafValidity not a duration", func(c *types.Config) { c.PKI = &types.PKI{LeafValidity: "90d"} }, []fieldErr{{inv, "pki.leafValidity"}}},
		{"pki.leafValidity below the floor", func(c *types.Config) { c.PKI = &types.PKI{LeafValidity: "10m"} }, []fieldErr{{inv, "pki.leafValidity"}}},
		{"pki.leafValidity above a year", func(c *types.Config) { c.PKI = &types.PKI{LeafValidity: "8761h"} }, []fieldErr{{inv, "pki.leafValidity"}}},
		{"pki.leafValidity short for tests", func(c *types.Config) {
			c.PKI = &types.PKI{LeafValidity: "10m", AllowShortLeafValidityForTests: true}
		}, nil},
		{"pki.leafValidity too short even for tests", func(c *types.Config) {
			c.PKI = &types.PKI{LeafValidity: "1m", AllowShortLeafValidityForTests: true}
		}, []fieldErr{{inv, "pki.leafValidity"}}},
		{"pki.renewBefore 60 days of a year", func(c *types.Config) { c.PKI = &types.PKI{RenewBefore: "1440h"} }, nil},
		{"pki.renewal Manual", func(c *types.Config) { c.PKI = &types.PKI{Renewal: "Manual"} }, nil},
		{"pki.renewal unknown", func(c *types.Config) { c.PKI = &types.PKI{Renewal: "Sometimes"} }, []fieldErr{{ns, "pki.renewal"}}},
		{"pki.renewBefore with Manual", func(c *types.Config) { c.PKI = &types.PKI{Renewal: "Manual", RenewBefore: "720h"} }, []fieldErr{{inv, "pki.renewBefore"}}},
		{"pki.renewBefore over half the lifetime", func(c *types.Config) {
			c.PKI = &types.PKI{LeafValidity: "2160h", RenewBefore: "1081h"}
		}, []fieldErr{{inv, "pki.renewBefore"}}},
		{"pki.renewBefore below an hour", func(c *types.Config) { c.PKI = &types.PKI{RenewBefore: "59m"} }, []fieldErr{{inv, "pki.renewBefore"}}},
		{"pki.renewBefore not a duration", func(c *types.Config) { c.PKI = &types.PKI{RenewBefore: "30d"} }, []fieldErr{{inv, "pki.renewBefore"}}},
		{"pki.renewBefore short for tests", func(c *types.Config) {
			c.PKI = &types.PKI{LeafValidity: "60m", RenewBefore: "54m", AllowShortLeafValidityForTests: true}
		}, nil},
		{"pki.renewBefore the whole lifetime, even for tests", func(c *types.Config) {
			c.PKI = &types.PKI{LeafValidity: "60m", RenewBefore: "60m", AllowShortLeafValidityForTests: true}
		}, []fieldErr{{inv, "pki.renewBefore"}}},
		{"pki.leafValidity and renewBefore both wrong, both named", func(c *types.Config) {
			c.PKI = &types.PKI{LeafValidity: "10m", Renewal: "Never"}
		}, []fieldErr{{inv, "pki.leafValidity"}, {ns, "pki.renewal"}}},
		{"backup daily, encrypted", func(c *types.Config) {
			c.Backup = &types.Backup{Schedule: "0 3 * * *", Keep: 14, EncryptTo: []string{"age1ql3z7hjy54pw3hyww5ayyfg7zqgvc7w3j2elw8zmrj2kg5sfn9aqmcac8p"}}
		}, nil},
		{"backup without a schedule", func(c *types.Config) { c.Backup = &types.Backup{} }, []fieldErr{{req, "backup.schedule"}}},
		{"backup every errors at once", func(c *types.Config) {
			c.Backup = &types.Backup{Schedule: "every day", Keep: 101, EncryptTo: []string{"AGE-SECRET-KEY-1QQQ", "age1ql3z7hjy54pw3hyww5ayyfg7zqgvc7w3j2elw8zmrj2kg5sfn9aqmcac8p"}}
		}, []fieldErr{{inv, "backup.schedule"}, {inv, "backup.keep"}, {inv, "backup.encryptTo[0]"}}},
		{"backup schedule with a time zone", func(c *types.Config) { c.Backup = &types.Backup{Schedule: "CRON_TZ=Europe/Paris 0 3 * * *"} }, []fieldErr{{inv, "backup.schedule"}}},
		{"controlPlaneHardwareSpeed", func(c *types.Config) { c.ControlPlaneHardwareSpeed = "Fast" }, []fieldErr{{ns, "controlPlaneHardwareSpeed"}}},
		{"controlPlaneHardwareSpeed Slower", func(c *types.Config) { c.ControlPlaneHardwareSpeed = types.HardwareSpeedSlower }, nil},
		{"kubernetesVersion unknown", func(c *types.Config) { c.KubernetesVersion = "v1.30.0" }, []fieldErr{{ns, "kubernetesVersion"}}},
		{"kubernetesVersion older release", func(c *types.Config) { c.KubernetesVersion = "v1.35.4" }, nil},
		{"kubernetesVersion without v", func(c *types.Config) { c.KubernetesVersion = "1.35.4" }, nil},
		{"clusterNetwork missing", func(c *types.Config) { c.Networking.ClusterNetwork = nil }, []fieldErr{{req, "networking.clusterNetwork"}}},
		{"clusterNetwork syntax", func(c *types.Config) { c.Networking.ClusterNetwork[0].CIDR = "10.128.0.0/33" },
			[]fieldErr{{inv, "networking.clusterNetwork[0].cidr"}}},
		{"clusterNetwork host bits", func(c *types.Config) { c.Networking.ClusterNetwork[0].CIDR = "10.128.0.1/14" },
			[]fieldErr{{inv, "networking.clusterNetwork[0].cidr"}}},
		{"clusterNetwork IPv6", func(c *types.Config) { c.Networking.ClusterNetwork[0].CIDR = "fd00::/48" },
			[]fieldErr{{inv, "networking.clusterNetwork[0].cidr"}}},
		{"hostPrefix outside cidr", func(c *types.Config) { c.Networking.ClusterNetwork[0].HostPrefix = 12 },
			[]fieldErr{{inv, "networking.clusterNetwork[0].hostPrefix"}}},
		{"hostPrefix too small a block", func(c *types.Config) { c.Networking.ClusterNetwork[0].HostPrefix = 26 },
			[]fieldErr{{inv, "networking.clusterNetwork[0].hostPrefix"}}},
		{"cluster network too small for the nodes", func(c *types.Config) { c.Networking.ClusterNetwork[0].CIDR = "10.128.0.0/22" },
			[]fieldErr{{inv, "networking.clusterNetwork[0].hostPrefix"}}},
		{"serviceNetwork missing", func(c *types.Config) { c.Networking.ServiceNetwork = nil }, []fieldErr{{req, "networking.serviceNetwork"}}},
		{"serviceNetwork two blocks", func(c *types.Config) {
			c.Networking.ServiceNetwork = append(c.Networking.ServiceNetwork, "172.31.0.0/16")
		},
			[]fieldErr{{many, "networking.serviceNetwork"}}},
		{"serviceNetwork syntax", func(c *types.Config) { c.Networking.ServiceNetwork[0] = "172.30.0.0" },
			[]fieldErr{{inv, "networking.serviceNetwork[0]"}}},
		{"serviceNetwork too small", func(c *types.Config) { c.Networking.ServiceNetwork[0] = "172.30.0.0/25" },
			[]fieldErr{{inv, "networking.serviceNetwork[0]"}}},
		{"serviceNetwork too large", func(c *types.Config) { c.Networking.ServiceNetwork[0] = "172.0.0.0/11" },
			[]fieldErr{{inv, "networking.serviceNetwork[0]"}}},
		{"serviceNetwork overlaps clusterNetwork", func(c *types.Config) { c.Networking.ServiceNetwork[0] = "10.128.0.0/16" },
			[]fieldErr{{inv, "networking.serviceNetwork[0]"}}},
		{"clusterNetwork entries overlap", func(c *types.Config) {
			c.Networking.ClusterNetwork = append(c.Networking.ClusterNetwork, types.ClusterNetworkEntry{CIDR: "10.130.0.0/16", HostPrefix: 23})
		}, []fieldErr{{inv, "networking.clusterNetwork[1].cidr"}}},
		{"machineNetwork overlaps serviceNetwork", func(c *types.Config) {
			useNone(c)
			c.Networking.MachineNetwork[0].CIDR = "172.30.4.0/24"
		}, []fieldErr{{inv, "networking.machineNetwork[0].cidr"}}},
		{"machineNetwork syntax", func(c *types.Config) { useNone(c); c.Networking.MachineNetwork[0].CIDR = "x" },
			[]fieldErr{{inv, "networking.machineNetwork[0].cidr"}}},
		{"machineNetwork too small for the nodes", func(c *types.Config) { useNone(c); c.Networking.MachineNetwork[0].CIDR = "10.0.0.0/30" },
			[]fieldErr{{inv, "networking.machineNetwork[0].cidr"}}},
		{"no platform", func(c *types.Config) { c.Platform = types.Platform{} }, []fieldErr{{req, "platform"}}},
		{"two platforms", func(c *types.Config) { c.Platform.None = &none.Platform{} }, []fieldErr{{inv, "platform"}}},
		{"local bridgeName too long", func(c *types.Config) { c.Platform.Local.BridgeName = "kiln-0123456789a" },
			[]fieldErr{{inv, "platform.local.bridgeName"}}},
		{"local bridgeName characters", func(c *types.Config) { c.Platform.Local.BridgeName = "br 0" },
			[]fieldErr{{inv, "platform.local.bridgeName"}}},
		{"local apiVIP syntax", func(c *types.Config) { c.Platform.Local.APIVIP = "api" }, []fieldErr{{inv, "platform.local.apiVIP"}}},
		{"local apiVIP outside machine network", func(c *types.Config) { c.Platform.Local.APIVIP = "10.67.0.1" },
			[]fieldErr{{inv, "platform.local.apiVIP"}}},
		{"local apiVIP is the network address", func(c *types.Config) { c.Platform.Local.APIVIP = "10.66.0.0" },
			[]fieldErr{{inv, "platform.local.apiVIP"}}},
		{"local takes one machine network", func(c *types.Config) {
			c.Networking.MachineNetwork = append(c.Networking.MachineNetwork, types.MachineNetworkEntry{CIDR: "10.67.0.0/24"})
		}, []fieldErr{{many, "networking.machineNetwork"}}},
		{"local machine network used by the host", func(c *types.Config) {
			c.Networking.MachineNetwork[0].CIDR = "192.0.2.0/25"
			c.Platform.Local.APIVIP = "192.0.2.1"
		}, []fieldErr{{inv, "networking.machineNetwork[0].cidr"}}},
		{"local pool sizes", func(c *types.Config) {
			c.ControlPlane.Platform.Local = &local.MachinePool{MemoryMiB: 512}
			c.Compute[0].Platform.Local = &local.MachinePool{CPUs: -1}
			c.Platform.Local.DefaultMachinePlatform = &local.MachinePool{MemoryMiB: 1}
		}, []fieldErr{{inv, "platform.local.defaultMachinePlatform.memoryMiB"}, {inv, "controlPlane.platform.local.memoryMiB"},
			{inv, "compute[0].platform.local.cpus"}}},
		{"sshKey", func(c *types.Config) { c.SSHKey = "ssh-rsa nonsense" }, []fieldErr{{inv, "sshKey"}}},
		{"sshKey second line", func(c *types.Config) { c.SSHKey = key + "\nnot a key" }, []fieldErr{{inv, "sshKey"}}},
		{"pullSecret not JSON", func(c *types.Config) { c.PullSecret = "hunter2" }, []fieldErr{{inv, "pullSecret"}}},
		{"pullSecret without auths", func(c *types.Config) { c.PullSecret = `{"auth":{}}` }, []fieldErr{{inv, "pullSecret"}}},
		{"trust bundle not PEM", func(c *types.Config) { c.AdditionalTrustBundle = "not pem" }, []fieldErr{{inv, "additionalTrustBundle"}}},
		{"trust bundle with a key", func(c *types.Config) {
			c.AdditionalTrustBundle = ca + string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte{1}}))
		}, []fieldErr{{inv, "additionalTrustBundle"}}},
		{"trust bundle bad certificate", func(c *types.Config) {
			c.AdditionalTrustBundle = string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte{1, 2}}))
		}, []fieldErr{{inv, "additionalTrustBundle"}}},
		{"proxy URLs", func(c *types.Config) {
			c.Proxy = &types.Proxy{HTTPProxy: "ftp://proxy", HTTPSProxy: "http://user:secret@/", NoProxy: "ok.example.com,a..b,"}
		}, []fieldErr{{inv, "proxy.httpProxy"}, {inv, "proxy.httpsProxy"}, {inv, "proxy.noProxy"}, {inv, "proxy.noProxy"}}},
		{"image mirrors", func(c *types.Config) {
			c.ImageMirrors = []types.ImageMirror{
				{Source: "docker.io", Mirrors: []string{"mirror.example.com/dockerhub", "registry.example.com:5000"}},
				{Source: "https://quay.io", Mirrors: []string{"https://mirror.example.com", "mirror.example.com/Bad Path"}},
				{Source: "docker.io"},
			}
		}, []fieldErr{{inv, "imageMirrors[1].source"}, {inv, "imageMirrors[1].mirrors[0]"}, {inv, "imageMirrors[1].mirrors[1]"},
			{dup, "imageMirrors[2].source"}, {req, "imageMirrors[2].mirrors"}}},
		{"timeouts", func(c *types.Config) { c.Timeouts.Bootstrap, c.Timeouts.API = "soon", "-5m" },
			[]fieldErr{{inv, "timeouts.bootstrap"}, {inv, "timeouts.api"}}},
		{"all errors at once", func(c *types.Config) {
			c.APIVersion, c.Metadata.Name, c.Networking.ServiceNetwork[0], c.Timeouts.Install = "", "", "10.128.0.0/16", "x"
		}, []fieldErr{{req, "apiVersion"}, {req, "metadata.name"}, {inv, "networking.serviceNetwork[0]"}, {inv, "timeouts.install"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := defaulted(t)
			tt.mutate(c)
			errs := Validate(c, testPlatforms())
			if got := asData(errs); !slices.Equal(got, tt.want) {
				t.Errorf("errors = %v\nwant %v\n%v", got, tt.want, errs)
			}
			for _, e := range errs {
				for _, secret := range []string{"hunter2", "secret", "dXNlcjpwYXNz"} {
					if strings.Contains(e.Error(), secret) {
						t.Errorf("error shows a secret: %v", e)
					}
				}
			}
		})
	}
}

// A platform section in the types whose platform kiln does not list is not
// supported, whatever its content.
func TestValidateUnlistedPlatform(t *testing.T) {
	c := defaulted(t)
	c.Platform = types.Platform{None: &none.Platform{}}
	localOnly := testPlatforms()[:1]
	if got, want := asData(Validate(c, localOnly)), []fieldErr{{field.ErrorTypeNotSupported, "platform"}}; !slices.Equal(got, want) {
		t.Errorf("errors = %v, want %v", got, want)
	}
}

// An unknown networkType is reported with its value and every accepted one.
func TestValidateNetworkType(t *testing.T) {
	c := defaulted(t)
	c.Networking.NetworkType = "Flannel"
	got := Validate(c, testPlatforms())
	want := field.ErrorList{field.NotSupported(field.NewPath("networking", "networkType"), "Flannel",
		[]string{"KilnBridge", "KilnVXLAN"})}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("errors = %v, want %v", got, want)
	}
}

func TestValidationErrorFormat(t *testing.T) {
	c := defaulted(t)
	c.Networking.ServiceNetwork[0] = "10.128.0.0/16"
	c.Metadata.Name = ""
	err := invalid(Validate(c, testPlatforms()))
	want := "install-config.yaml: metadata.name: Required value: the cluster name, a DNS label such as \"dev\"\n" +
		"install-config.yaml: networking.serviceNetwork[0]: Invalid value: \"10.128.0.0/16\": overlaps networking.clusterNetwork[0].cidr"
	if err == nil || err.Error() != want {
		t.Errorf("error =\n%v\nwant\n%s", err, want)
	}
}
