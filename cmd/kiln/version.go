package main

import (
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/kiln-project/kiln/assets/release"
	"github.com/kiln-project/kiln/cmd/cluster/exitcode"
)

// versionInfo is what `kiln version` reports: kiln's own build and the
// releases of the components it installs.
type versionInfo struct {
	// Kiln is the module version (`go install ...@vX`), else "(devel)".
	Kiln string `json:"kiln"`
	// Commit is the VCS revision the binary was built from, when Go stamped
	// it (a build inside a git checkout); CommitTime its time and Modified
	// whether the work tree had changes.
	Commit     string `json:"commit,omitempty"`
	CommitTime string `json:"commitTime,omitempty"`
	Modified   bool   `json:"modified,omitempty"`
	// Go is the toolchain that built kiln, Platform its GOOS/GOARCH.
	Go       string `json:"go"`
	Platform string `json:"platform"`
	// Release is what kiln installs by default: the newest release.
	Release releaseInfo `json:"release"`
	// Releases are every Kubernetes release an install-config may name
	// (kubernetesVersion), newest first; each shares Release's other pins.
	Releases []kubernetesRelease `json:"releases"`
}

// kubernetesRelease is one release's versions that change with Kubernetes.
type kubernetesRelease struct {
	Kubernetes string `json:"kubernetes"`
	Etcd       string `json:"etcd"`
	CoreDNS    string `json:"coredns"`
}

// releaseInfo names the pinned release of each component (assets/release).
type releaseInfo struct {
	Kubernetes           string `json:"kubernetes"`
	Etcd                 string `json:"etcd"`
	CoreDNS              string `json:"coredns"`
	Pause                string `json:"pause"`
	LocalPathProvisioner string `json:"localPathProvisioner"`
	MetricsServer        string `json:"metricsServer"`
	// KubeRouter enforces NetworkPolicies (its policy controller only).
	KubeRouter string `json:"kubeRouter"`
	// MetalLB gives LoadBalancer Services of ssh clusters addresses.
	MetalLB string `json:"metallb"`
	// Containerd and Runc are the container runtime, built from source
	// like the rest.
	Containerd string `json:"containerd"`
	Runc       string `json:"runc"`
	// Registry is the distribution registry of the local platform's
	// registry add-on, which runs on the host.
	Registry string `json:"registry"`
}

// readVersion builds the report from Go's build information (ok false when
// the binary carries none).
func readVersion(bi *debug.BuildInfo, ok bool) versionInfo {
	def := release.Default()
	v := versionInfo{
		Kiln:     "(devel)",
		Go:       runtime.Version(),
		Platform: runtime.GOOS + "/" + runtime.GOARCH,
		Release: releaseInfo{
			Kubernetes:           def.Kubernetes,
			Etcd:                 def.Etcd,
			CoreDNS:              def.CoreDNS,
			Pause:                release.PauseVersion,
			LocalPathProvisioner: release.LocalPathProvisionerVersion,
			MetricsServer:        release.MetricsServerVersion,
			KubeRouter:           release.KubeRouterVersion,
			MetalLB:              release.MetalLBVersion,
			Containerd:           release.ContainerdVersion,
			Runc:                 release.RuncVersion,
			Registry:             release.RegistryVersion,
		},
	}
	for _, r := range release.Releases() {
		v.Releases = append(v.Releases, kubernetesRelease{Kubernetes: r.Kubernetes, Etcd: r.Etcd, CoreDNS: r.CoreDNS})
	}
	if !ok || bi == nil {
		return v
	}
	if bi.Main.Version != "" {
		v.Kiln = bi.Main.Version
	}
	if bi.GoVersion != "" {
		v.Go = bi.GoVersion
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Commit = s.Value
		case "vcs.time":
			v.CommitTime = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	return v
}

// write prints v as text, or as JSON when output is "json".
func (v versionInfo) write(w io.Writer, output string) error {
	if output == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	fmt.Fprintf(w, "kiln %s\n", v.Kiln)
	if v.Commit != "" {
		modified := ""
		if v.Modified {
			modified = ", with uncommitted changes"
		}
		fmt.Fprintf(w, "commit: %s (%s%s)\n", v.Commit, v.CommitTime, modified)
	}
	fmt.Fprintf(w, "built with: %s %s\n", v.Go, v.Platform)
	fmt.Fprintf(w, "release (default):\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	r := v.Release
	for _, row := range [][2]string{
		{"kubernetes", r.Kubernetes}, {"etcd", r.Etcd}, {"coredns", r.CoreDNS}, {"pause", r.Pause},
		{"local-path-provisioner", r.LocalPathProvisioner}, {"metrics-server", r.MetricsServer},
		{"kube-router", r.KubeRouter}, {"metallb (ssh)", r.MetalLB},
		{"containerd", r.Containerd}, {"runc", r.Runc}, {"registry (host)", r.Registry},
	} {
		fmt.Fprintf(tw, "  %s\t%s\n", row[0], row[1])
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "releases (install-config kubernetesVersion; the first is the default):\n")
	for _, k := range v.Releases {
		fmt.Fprintf(w, "  %s  etcd %s, coredns %s\n", k.Kubernetes, k.Etcd, k.CoreDNS)
	}
	return nil
}

func newVersionCmd(o *rootOptions) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print kiln's version and commit, the Go that built it, and the releases it installs",
		Long: "Print kiln's version (the module version of a `go install`ed kiln, else (devel)), the commit it was\n" +
			"built from, the Go toolchain, the pinned release of every component it installs by default, and\n" +
			"every Kubernetes release an install-config may choose (kubernetesVersion).\n" +
			"--output json prints the same as JSON.",
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if output != "text" && output != "json" {
				return exitcode.With(exitcode.Input, fmt.Errorf("--output %q: want text or json", output))
			}
			bi, ok := debug.ReadBuildInfo()
			return readVersion(bi, ok).write(o.stdout, output)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "text or json")
	return cmd
}
