package machine

import (
	"slices"
	"testing"
)

var nspawnBase = []string{
	"systemd-nspawn", "--quiet", "--boot", "--directory=/var/lib/kiln/machines/m0/root", "--machine=m0",
	"--register=no", "--keep-unit", "--network-bridge=kiln0", "--system-call-filter=@keyring bpf",
	"--bind-ro=/dev/kmsg", "--capability=CAP_SYSLOG", "--private-users=no", "--resolv-conf=off",
	"--timezone=off", "--link-journal=no", "--console=read-only",
}

func TestNspawnArgv(t *testing.T) {
	base := nspawnArgs{Name: "m0", Root: "/var/lib/kiln/machines/m0/root", Bridge: "kiln0"}
	withBinds := base
	withBinds.Binds = []Bind{
		{Source: "/var/lib/kiln/machines/m0/bind-containerd", Target: "/var/lib/containerd"},
		{Source: "/usr/bin/kiln", Target: "/usr/local/bin/kiln", ReadOnly: true},
	}
	withSysctls := base
	withSysctls.Sysctls = true
	tests := []struct {
		name string
		args nspawnArgs
		want []string
	}{
		{"plain", base, nspawnBase},
		{"binds", withBinds, append(slices.Clone(nspawnBase),
			"--bind=/var/lib/kiln/machines/m0/bind-containerd:/var/lib/containerd",
			"--bind-ro=/usr/bin/kiln:/usr/local/bin/kiln")},
		{"sysctl shims", withSysctls, append(slices.Clone(nspawnBase),
			"--bind-ro=/etc/kiln/sysctl/vm/overcommit_memory:/proc/sys/vm/overcommit_memory",
			"--bind-ro=/etc/kiln/sysctl/vm/panic_on_oom:/proc/sys/vm/panic_on_oom",
			"--bind-ro=/etc/kiln/sysctl/kernel/panic:/proc/sys/kernel/panic",
			"--bind-ro=/etc/kiln/sysctl/kernel/panic_on_oops:/proc/sys/kernel/panic_on_oops",
			"--bind-ro=/etc/kiln/sysctl/kernel/keys/root_maxkeys:/proc/sys/kernel/keys/root_maxkeys",
			"--bind-ro=/etc/kiln/sysctl/kernel/keys/root_maxbytes:/proc/sys/kernel/keys/root_maxbytes")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := nspawnArgv(tt.args); !slices.Equal(got, tt.want) {
				t.Errorf("nspawnArgv =\n%q\nwant\n%q", got, tt.want)
			}
		})
	}
}

func TestNsenterArgv(t *testing.T) {
	tests := []struct {
		leader int
		argv   []string
		want   []string
	}{
		{123, []string{"systemctl", "is-system-running", "--wait"}, []string{
			"nsenter", "--target", "123", "--mount", "--uts", "--ipc", "--net", "--pid", "--root", "--wd", "--",
			"/usr/bin/env", "-i", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8",
			"systemctl", "is-system-running", "--wait"}},
		{7, []string{"cat", "/etc/hostname"}, []string{
			"nsenter", "--target", "7", "--mount", "--uts", "--ipc", "--net", "--pid", "--root", "--wd", "--",
			"/usr/bin/env", "-i", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8",
			"cat", "/etc/hostname"}},
	}
	for _, tt := range tests {
		if got := nsenterArgv(tt.leader, tt.argv); !slices.Equal(got, tt.want) {
			t.Errorf("nsenterArgv(%d, %q) =\n%q\nwant\n%q", tt.leader, tt.argv, got, tt.want)
		}
	}
}

func TestMountArgv(t *testing.T) {
	tests := []struct {
		name string
		got  []string
		want []string
	}{
		{"overlay", overlayMountArgv("/img", "/s/m/upper", "/s/m/work", "/s/m/root"),
			[]string{"mount", "-t", "overlay", "overlay", "-o", "lowerdir=/img,upperdir=/s/m/upper,workdir=/s/m/work", "/s/m/root"}},
		{"umount", umountArgv("/s/m/root", false), []string{"umount", "/s/m/root"}},
		{"umount lazy", umountArgv("/s/m/root", true), []string{"umount", "--lazy", "/s/m/root"}},
		{"copy tree", copyTreeArgv("/img/var/lib/containerd", "/s/m/bind-containerd"),
			[]string{"cp", "-a", "--reflink=auto", "/img/var/lib/containerd/.", "/s/m/bind-containerd/"}},
		{"link tree", linkTreeArgv("/img/var/lib/containerd", "/s/m/bind-containerd"),
			[]string{"cp", "-a", "--link", "/img/var/lib/containerd/.", "/s/m/bind-containerd/"}},
	}
	for _, tt := range tests {
		if !slices.Equal(tt.got, tt.want) {
			t.Errorf("%s: got %q, want %q", tt.name, tt.got, tt.want)
		}
	}
}
