# kiln preflight: report what a host offers, one key=value per line.
# It changes nothing. It runs as root (through sudo when the SSH user is
# not root) under /bin/sh, and needs only coreutils, grep and awk.
kv() { printf '%s=%s\n' "$1" "$2"; }
kv clock "$(date +%s.%N)"
if [ -r /etc/os-release ]; then
	. /etc/os-release
	kv os "${ID:-}/${VERSION_ID:-}/${PRETTY_NAME:-}"
fi
kv uid "$(id -u)"
kv pid1 "$(cat /proc/1/comm 2>/dev/null)"
kv systemd "$(systemctl --version 2>/dev/null | awk 'NR==1{print $2}')"
kv cgroupfs "$(stat -fc %T /sys/fs/cgroup 2>/dev/null)"
kv cgroupcontrollers "$(cat /sys/fs/cgroup/cgroup.controllers 2>/dev/null)"
[ -d /proc/sys/net/bridge ] && kv bridgenf yes
rel=$(uname -r)
kv kernel "$rel"
for m in overlay bridge veth br_netfilter nf_conntrack ip_set xt_set; do
	if [ -e "/sys/module/$m" ]; then s=loaded
	elif grep -q "/$m\.ko" "/lib/modules/$rel/modules.builtin" 2>/dev/null; then s=builtin
	elif grep -q "/$m\.ko" "/lib/modules/$rel/modules.dep" 2>/dev/null; then s=loadable
	elif [ -r "/lib/modules/$rel/modules.dep" ]; then s=missing
	else s=unknown
	fi
	kv "module.$m" "$s"
done
grep -q '	overlay$' /proc/filesystems && kv overlayfs yes
awk '$4 == "0A" { split($2, a, ":"); print "listen=" a[2] }' /proc/net/tcp /proc/net/tcp6 2>/dev/null
kv swap "$(awk 'NR > 1' /proc/swaps 2>/dev/null | wc -l)"
kv hostname "$(cat /proc/sys/kernel/hostname)"
kv machineid "$(cat /etc/machine-id 2>/dev/null)"
# The NTP clients that run; timedatectl would start systemd-timedated.
kv ntp "$(for u in systemd-timesyncd chrony chronyd ntpsec ntp openntpd; do
	systemctl is-active --quiet "$u.service" 2>/dev/null && printf '%s ' "$u"
done)"
# The NTP clients kiln can give platform.ssh.ntpServers (TimeClients),
# installed whether they run or not, and the source directories chrony's
# configuration names.
kv timeclients "$(for u in chrony chronyd systemd-timesyncd; do
	systemctl cat "$u.service" >/dev/null 2>&1 && printf '%s ' "$u"
done)"
kv chronysourcedirs "$(cat /etc/chrony/chrony.conf /etc/chrony.conf 2>/dev/null | awk '$1 == "sourcedir" { printf "%s ", $2 }')"
# What the host must have from its own packages, and what would clash
# with the payload kiln brings (docs/platform-ssh.md).
for t in iptables; do command -v "$t" >/dev/null 2>&1 && kv "tool.$t" yes; done
for t in containerd dockerd kubelet crio k3s k0s; do
	p=$(command -v "$t" 2>/dev/null) && kv "clash" "$p"
done
for u in containerd docker kubelet crio k3s k0scontroller k0sworker; do
	systemctl is-active --quiet "$u.service" 2>/dev/null && kv "clash" "$u.service"
done
for e in /var/lib/extensions/kiln-*; do [ -e "$e" ] && kv "payload" "$e"; done
kv memorykib "$(awk '$1 == "MemTotal:" { print $2 }' /proc/meminfo)"
kv varfreekib "$(df -Pk /var 2>/dev/null | awk 'NR == 2 { print $4 }')"
