#!/usr/bin/env bash
# Installs (or upgrades in place) k1s from a built artifact and starts it:
#   K1S_ARTIFACT=dist/k1s_0.1.0-1_amd64.deb hack/install.sh        (dpkg -i, or apt-get install ./FILE)
#   K1S_ARTIFACT=dist/k1s-0.1.0-linux-amd64.tar.gz hack/install.sh (its install.sh)
# Without K1S_ARTIFACT, hack/package.sh builds one first (release build). Then the unit is enabled
# and (re)started (KillMode=process: pods survive the restart), the node is awaited Ready, and the
# kubeconfig path and `kubectl get nodes` are printed. Where systemd is not PID 1 (containers, CI)
# it says so and runs `k1s server` in the foreground instead.
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" -eq 0 ] || { echo "hack/install.sh: run as root" >&2; exit 1; }
kubeconfig=${K1S_KUBECONFIG_OUTPUT:-/etc/k1s/k1s.yaml}
artifact=${K1S_ARTIFACT:-}
if [ -z "$artifact" ]; then
  hack/package.sh
  if command -v dpkg >/dev/null 2>&1; then artifact=$(ls -t dist/k1s_*.deb | head -1)
  else artifact=$(ls -t dist/k1s-*.tar.gz | head -1); fi
fi
[ -f "$artifact" ] || { echo "hack/install.sh: $artifact not found" >&2; exit 1; }

# Whether every package the .deb depends on is installed (one alternative of each; versions are
# left to dpkg, which refuses a too old one).
deps_installed() {
  local dep alt ok
  while IFS= read -r dep; do
    [ -n "$dep" ] || continue
    ok=1
    for alt in $(printf '%s' "$dep" | sed 's/([^)]*)//g; s/|/ /g'); do
      case "$(dpkg-query -W -f='${db:Status-Abbrev}' "$alt" 2>/dev/null)" in ii*) ok=0; break ;; esac
    done
    [ "$ok" -eq 0 ] || return 1
  done < <(dpkg-deb -f "$1" Depends | tr ',' '\n')
}
case "$artifact" in
  *.deb)
    deb=$(realpath "$artifact")
    # apt-get first reads every package list (2 s of CPU here, and more where its binary cache is
    # off, as in Debian's Docker images): with every dependency installed already, dpkg -i does
    # the same install at a third of the time. Otherwise (or when dpkg refuses, e.g. a dependency
    # too old) apt-get installs the package with what it needs; --reinstall: the same version
    # installed again is an upgrade in place too.
    if deps_installed "$deb" && dpkg -i "$deb" >/dev/null; then :; else
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --reinstall "$deb" >/dev/null
    fi
    k1s=/usr/bin/k1s ;;
  *.tar.gz)
    tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
    tar -C "$tmp" -xzf "$artifact"
    K1S_NO_START=1 "$tmp"/k1s-*/install.sh
    k1s=/usr/local/bin/k1s ;;
  *) echo "hack/install.sh: $artifact is neither a .deb nor a .tar.gz" >&2; exit 1 ;;
esac
echo "hack/install.sh: installed $artifact ($($k1s version))"

wait_ready() {
  local i
  for i in $(seq 1200); do
    if [ -f "$kubeconfig" ] && [ "$(kubectl --kubeconfig "$kubeconfig" get nodes \
         -o 'jsonpath={.items[0].status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ]; then
      echo "hack/install.sh: node Ready; export KUBECONFIG=$kubeconfig"
      kubectl --kubeconfig "$kubeconfig" get nodes
      return 0
    fi
    sleep 0.1
  done
  echo "hack/install.sh: the node did not become Ready in 120 s" >&2
  return 1
}

if [ -d /run/systemd/system ]; then
  systemctl daemon-reload
  systemctl enable k1s.service
  systemctl restart k1s.service
  wait_ready
else
  echo "hack/install.sh: systemd is not PID 1 here: running '$k1s server' in the foreground (Ctrl-C stops it)"
  rm -rf "${tmp:-}" # exec skips the EXIT trap
  wait_ready &
  exec "$k1s" server
fi
