#!/usr/bin/env bash
# Builds the artifacts a user installs without a Rust toolchain, into dist/:
#   k1s_VERSION-1_ARCH.deb            (cargo deb: metadata in cmd/k1s/Cargo.toml, scripts in deploy/package/)
#   k1s-VERSION-linux-ARCH.tar.gz     (the same files plus install.sh, for non-Debian hosts)
# K1S_BINARY=path packages an already built binary (the test suite's, so CI builds once);
# otherwise the release binary is built. The binary is always stripped.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
dist=${K1S_DIST:-$root/dist}
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
arch=$(dpkg --print-architecture 2>/dev/null || uname -m)
case "$arch" in x86_64) arch=amd64 ;; aarch64) arch=arm64 ;; esac

tools=${K1S_CARGO_TOOLS:-/var/tmp/cargo-tools}
export PATH="$tools/bin:$PATH"
if ! cargo deb --version >/dev/null 2>&1; then
  echo "package.sh: installing cargo-deb into $tools" >&2
  cargo install cargo-deb --locked --root "$tools"
fi

stage=$(mktemp -d /tmp/k1s-package.XXXXXX)
trap 'rm -rf "$stage"' EXIT
if [ -n "${K1S_BINARY:-}" ]; then
  binary=$K1S_BINARY
else
  export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$root/target}
  # A reproducible stamp: the commit's time, unless the caller chose one.
  if [ -z "${SOURCE_DATE_EPOCH:-}" ] && epoch=$(git -C "$root" log -1 --format=%ct 2>/dev/null); then
    export SOURCE_DATE_EPOCH=$epoch
  fi
  cargo build --release --workspace --bins
  binary=$CARGO_TARGET_DIR/release/k1s
fi
[ -x "$binary" ] || { echo "package.sh: $binary is not an executable" >&2; exit 1; }
# cargo deb --no-build takes target/release/k1s of the target dir it is pointed at. gzip, not xz:
# dpkg unpacks it faster (the install is timed by hack/bench-install.sh); the file is larger.
mkdir -p "$stage/target/release" "$dist"
strip --strip-unneeded -o "$stage/target/release/k1s" "$binary"

deb=$(CARGO_TARGET_DIR="$stage/target" cargo deb -p k1s --no-build --no-strip --fast -Z gz --compress-system \
        --output "$dist" 2>"$stage/deb.log" | tail -1) || { cat "$stage/deb.log" >&2; exit 1; }
echo "package.sh: $deb"

name=k1s-$version-linux-$arch
tree=$stage/$name
install -D -m 0755 "$stage/target/release/k1s" "$tree/bin/k1s"
install -D -m 0755 deploy/package/k1s-uninstall.sh "$tree/bin/k1s-uninstall.sh"
install -D -m 0755 deploy/package/k1s-killall.sh "$tree/bin/k1s-killall.sh"
install -D -m 0644 systemd/k1s.service "$tree/systemd/k1s.service"
install -D -m 0644 systemd/k1s.env "$tree/systemd/k1s.env"
install -D -m 0644 deploy/package/config.yaml "$tree/etc/config.yaml"
install -D -m 0755 deploy/package/install.sh "$tree/install.sh"
install -D -m 0644 README.md "$tree/README.md"
# gzip -1: the binary dominates and compresses little better at higher levels.
tar -C "$stage" -cf - "$name" | gzip -1 > "$dist/$name.tar.gz"
echo "package.sh: $dist/$name.tar.gz"
