#!/usr/bin/env bash
# Installs what is missing, builds k1s and runs `k1s server` (kubeconfig: /etc/k1s/k1s.yaml).
set -euo pipefail
cd "$(dirname "$0")/.."
hack/install-deps.sh
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
cargo build --release -p k1s
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
$SUDO install -m 0755 "$CARGO_TARGET_DIR/release/k1s" /usr/local/bin/k1s
exec $SUDO /usr/local/bin/k1s server "$@"
