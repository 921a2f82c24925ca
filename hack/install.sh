#!/usr/bin/env bash
# Installs k1s as a systemd service: prerequisites, the release binary, the unit and its env file.
set -euo pipefail
cd "$(dirname "$0")/.."
hack/install-deps.sh
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
cargo build --release -p k1s
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
$SUDO install -m 0755 "$CARGO_TARGET_DIR/release/k1s" /usr/local/bin/k1s
$SUDO install -d /etc/k1s
[ -f /etc/k1s/k1s.env ] || $SUDO install -m 0644 systemd/k1s.env /etc/k1s/k1s.env
$SUDO install -m 0644 systemd/k1s.service /etc/systemd/system/k1s.service
$SUDO systemctl daemon-reload
$SUDO systemctl enable --now k1s
echo "k1s is running; export KUBECONFIG=/etc/k1s/k1s.yaml"
