#!/bin/sh
# Installs k1s from this unpacked tarball on a host without dpkg: the binary and the killall and
# uninstall scripts in /usr/local/bin, the unit in /etc/systemd/system, the default config and env
# file in /etc/k1s (kept if present). Every installed file is listed in
# /usr/local/lib/k1s/installed-files, which `k1s uninstall` removes. Re-running upgrades in place.
# K1S_NO_START=1 installs without enabling or (re)starting the unit.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
[ "$(id -u)" -eq 0 ] || { echo "install.sh: run as root" >&2; exit 1; }
bin=/usr/local/bin
manifest=/usr/local/lib/k1s/installed-files
unit=/etc/systemd/system/k1s.service
install -d "$bin" /usr/local/lib/k1s /etc/k1s /etc/systemd/system
# A running binary cannot be overwritten in place: install a new file and rename it over.
install -m 0755 "$here/bin/k1s" "$bin/.k1s.new" && mv -f "$bin/.k1s.new" "$bin/k1s"
install -m 0755 "$here/bin/k1s-uninstall.sh" "$bin/k1s-uninstall.sh"
install -m 0755 "$here/bin/k1s-killall.sh" "$bin/k1s-killall.sh"
[ -f /etc/k1s/config.yaml ] || install -m 0644 "$here/etc/config.yaml" /etc/k1s/config.yaml
[ -f /etc/k1s/k1s.env ] || install -m 0644 "$here/systemd/k1s.env" /etc/k1s/k1s.env
{
  echo "# Installed by k1s install.sh"
  sed "s#^ExecStart=/usr/bin/k1s #ExecStart=$bin/k1s #" "$here/systemd/k1s.service"
} > "$unit.new" && chmod 0644 "$unit.new" && mv -f "$unit.new" "$unit"
printf '%s\n' "$bin/k1s" "$bin/k1s-uninstall.sh" "$bin/k1s-killall.sh" > "$manifest"
echo "install.sh: installed $bin/k1s ($("$bin/k1s" version)) and $unit"
if [ -d /run/systemd/system ]; then
  systemctl daemon-reload
  if [ "${K1S_NO_START:-0}" != "1" ]; then
    systemctl enable k1s.service
    # KillMode=process: only the server restarts, the pods keep running.
    systemctl restart k1s.service
    echo "install.sh: k1s.service (re)started; kubeconfig: /etc/k1s/k1s.yaml"
  fi
else
  echo "install.sh: systemd is not PID 1 here; run '$bin/k1s server' yourself"
fi
