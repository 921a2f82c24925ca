#!/usr/bin/env bash
# Prints how long an install takes until the node Ready, for the Debian package
# (`apt-get install ./k1s_*.deb`, then the server; and through `hack/install.sh`, which uses
# dpkg -i when the dependencies are there) and for the tarball (`hack/install.sh`), each with
# the server's start steps (from its log) in seconds from the install's start.
# Packages the given binary (K1S_BINARY, default: the debug build of $CARGO_TARGET_DIR) unless
# K1S_DEB and K1S_TARBALL name existing artifacts. Where systemd is not PID 1 the server runs in
# the foreground, as hack/install.sh does. Each install is removed afterwards (k1s uninstall, and
# dpkg --purge for the package). Needs root, the local registry (hack/registry.sh, hack/images.sh)
# and a host without another k1s on ports 6443/10250. Prints numbers, asserts nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" -eq 0 ] || { echo "bench-install.sh: run as root" >&2; exit 1; }
hack/registry.sh start >/dev/null
hack/images.sh >/dev/null
dist=${K1S_DIST:-$(mktemp -d /tmp/k1s-bench-dist.XXXXXX)}
[ -n "${K1S_DIST:-}" ] || trap 'rm -rf "$dist"' EXIT
if [ -z "${K1S_DEB:-}" ] || [ -z "${K1S_TARBALL:-}" ]; then
  K1S_BINARY=${K1S_BINARY:-${CARGO_TARGET_DIR:-$PWD/target}/debug/k1s} K1S_DIST=$dist hack/package.sh >/dev/null
  K1S_DEB=$(ls "$dist"/k1s_*.deb); K1S_TARBALL=$(ls "$dist"/k1s-*.tar.gz)
fi
# No internet here: the pause image comes from the local registry.
export K1S_PAUSE_IMAGE=127.0.0.1:5000/pause:3.10 K1S_CLUSTER_DNS_UPSTREAM=none
kubeconfig=/etc/k1s/k1s.yaml
now() { date +%s.%N; }
ready() {
  [ -f "$kubeconfig" ] && [ "$(kubectl --kubeconfig "$kubeconfig" get nodes \
    -o 'jsonpath={.items[0].status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ]
}
wait_ready() { for _ in $(seq 1200); do ready && return 0; sleep 0.05; done; echo "not Ready in 60 s" >&2; return 1; }
# Where the time went: each start step's first server log line (RFC 3339 UTC timestamps), in
# seconds from $2 (the install's start).
timeline() {
  local log=$1 t0=$2 step ts line
  for step in "first log line" "created a CA" "wrote kubeconfig" "containerd is ready" \
      "registered node" "node readiness changed" "node Ready: notifying systemd"; do
    if [ "$step" = "first log line" ]; then line=$(grep -m1 -E '^[0-9]{4}-' "$log" || true)
    else line=$(grep -m1 -F "$step" "$log" || true); fi
    ts=$(printf '%s' "$line" | grep -oE '^[0-9]{4}-[0-9-]+T[0-9:.]+Z' || true)
    [ -n "$ts" ] || continue
    printf '    %6.2f s  %s\n' "$(echo "$(date -d "$ts" +%s.%N) - $t0" | bc)" "$step"
  done
}
server=""
stop() {
  if [ -d /run/systemd/system ]; then systemctl stop k1s.service || true; fi
  if [ -n "$server" ]; then kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; server=""; fi
}

# 1. The Debian package: apt-get install, then the server (systemd or the foreground).
t0=$(now)
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$(realpath "$K1S_DEB")" >/dev/null
t1=$(now)
if [ -d /run/systemd/system ]; then systemctl start k1s.service; else /usr/bin/k1s server >"$dist/server.log" 2>&1 & server=$!; fi
wait_ready
t2=$(now)
stop
/usr/bin/k1s uninstall >/dev/null
dpkg --purge k1s >/dev/null
printf 'deb:     apt-get install %.2f s, then start to node Ready %.2f s: total %.2f s\n' \
  "$(echo "$t1 - $t0" | bc)" "$(echo "$t2 - $t1" | bc)" "$(echo "$t2 - $t0" | bc)"
[ -d /run/systemd/system ] || timeline "$dist/server.log" "$t0"

# apt-get's own share: reading the package lists and resolving, without installing (-s).
t0=$(now)
apt-get install -s -qq "$(realpath "$K1S_DEB")" >/dev/null
printf '         (of which apt-get itself, without dpkg: %.2f s, as apt-get install -s)\n' "$(echo "$(now) - $t0" | bc)"

# 2. The package through hack/install.sh: dpkg -i, its dependencies being installed already.
t0=$(now)
K1S_ARTIFACT=$K1S_DEB hack/install.sh >"$dist/deb-install.log" 2>&1 & server=$!
wait_ready
t1=$(now)
stop
/usr/bin/k1s uninstall >/dev/null
dpkg --purge k1s >/dev/null
printf 'deb:     hack/install.sh (dpkg -i) to node Ready %.2f s\n' "$(echo "$t1 - $t0" | bc)"
[ -d /run/systemd/system ] || timeline "$dist/deb-install.log" "$t0"

# 3. The tarball through hack/install.sh (foreground server where systemd is not PID 1).
t0=$(now)
K1S_ARTIFACT=$K1S_TARBALL hack/install.sh >"$dist/tarball.log" 2>&1 & server=$!
wait_ready
t1=$(now)
stop
/usr/local/bin/k1s uninstall >/dev/null
printf 'tarball: hack/install.sh to node Ready %.2f s\n' "$(echo "$t1 - $t0" | bc)"
[ -d /run/systemd/system ] || timeline "$dist/tarball.log" "$t0"
