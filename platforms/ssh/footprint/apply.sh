# Loads the kernel modules a node needs (and names them in
# modules-load.d for the host's next boot), merges the node payload into
# /usr, writes the machine's Ignition config and node environment, enables
# the payload's units and starts them with kiln-ignition.service, which
# applies the config. Set by kiln before this: rec, config (the Ignition
# config, base64), env (the node environment), config_file, env_file,
# payload_units and modules (space-separated), modules_file, and for the
# host's API proxy (none when proxy is empty) proxy (its configuration),
# proxy_file, proxy_unit, proxy_unit_file and proxy_unit_text; and the
# function put_file (putFileFn).
set -eu
if [ ! -e "$rec/recorded" ]; then
	echo "footprint: $rec has no record: kiln records a host before it changes it" >&2
	exit 1
fi
# A module that cannot be loaded here (a container, or built into the
# kernel) is left to the preflight, which named what is missing.
for m in $modules; do
	modprobe -q "$m" 2>/dev/null || true
done
mkdir -p "$(dirname "$modules_file")"
# shellcheck disable=SC2086 # one line per module
printf '%s\n' $modules >"$modules_file"
systemctl enable --quiet systemd-sysext.service
systemd-sysext refresh >/dev/null
if [ -n "$proxy" ]; then
	mkdir -p "$(dirname "$proxy_file")"
	put_file "$proxy_file" 0644 "$proxy"
	put_file "$proxy_unit_file" 0644 "$proxy_unit_text"
fi
systemctl daemon-reload
if [ -n "$proxy" ]; then
	systemctl enable --quiet "$proxy_unit"
	systemctl restart "$proxy_unit"
fi
umask 077
mkdir -p "$(dirname "$config_file")" "$(dirname "$env_file")"
rm -f "$config_file.tmp"
printf '%s' "$config" | base64 -d >"$config_file.tmp"
mv -f "$config_file.tmp" "$config_file"
put_file "$env_file" 0644 "$env"
# shellcheck disable=SC2086 # one word per unit
systemctl enable --quiet $payload_units
# shellcheck disable=SC2086
systemctl start --no-block $payload_units
echo "footprint: payload merged, kiln-ignition.service started"
