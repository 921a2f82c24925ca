#!/usr/bin/env bash
# The whole test suite on a fresh Debian/Ubuntu machine (run as root): installs what is
# missing, starts the local registry with the test images and a throwaway containerd for the
# CRI client tests, then runs unit, integration and end-to-end tests (real containerd).
set -euo pipefail
cd "$(dirname "$0")/.."
hack/install-deps.sh
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
export K1S_TEST_REQUIRE_CONTAINERD=1
# The fuzz targets run from this seed here: a gate repeats the same inputs (and the regressions)
# rather than deciding a landing by what one random run finds. Hunt with fresh seeds elsewhere.
export K1S_FUZZ_SEED=${K1S_FUZZ_SEED:-5eed0f0c1}

if [ "$(id -u)" -ne 0 ]; then
  echo "hack/test.sh: the end-to-end tests need root (containerd, CNI, cgroups)" >&2
  exit 1
fi

hack/registry.sh start
hack/images.sh

# A containerd for pkg/cri's tests against the real runtime (k1s starts its own elsewhere).
work=$(mktemp -d /tmp/k1s-cri-test.XXXXXX)
cleanup() {
  if [ -f "$work/pid" ]; then kill "$(cat "$work/pid")" 2>/dev/null || true; sleep 1; fi
  pkill -KILL -f "$work" 2>/dev/null || true
  grep " $work" /proc/self/mountinfo | awk '{print $5}' | sort -r | xargs -r -n1 umount -l 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work/cni" "$work/certs.d/127.0.0.1:5000"
cat > "$work/certs.d/127.0.0.1:5000/hosts.toml" <<HOSTS
server = "http://127.0.0.1:5000"
[host."http://127.0.0.1:5000"]
  capabilities = ["pull", "resolve"]
HOSTS
cat > "$work/cni/10-test.conflist" <<CNI
{"cniVersion": "1.0.0", "name": "k1s-cri-test", "plugins": [{"type": "bridge", "bridge": "k1scritest0",
 "isGateway": true, "ipMasq": false, "hairpinMode": true,
 "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.99.0.0/24"}]], "dataDir": "$work/ipam"}}]}
CNI
cat > "$work/config.toml" <<TOML
version = 2
root = "$work/root"
state = "$work/state"
[grpc]
  address = "$work/containerd.sock"
[plugins."io.containerd.internal.v1.opt"]
  path = "$work/root/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "127.0.0.1:5000/pause:3.10"
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  restrict_oom_score_adj = true
[plugins."io.containerd.grpc.v1.cri".containerd]
  snapshotter = "overlayfs"
  default_runtime_name = "runc"
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
  SystemdCgroup = false
[plugins."io.containerd.grpc.v1.cri".cni]
  bin_dir = "/usr/lib/cni"
  conf_dir = "$work/cni"
  max_conf_num = 1
[plugins."io.containerd.grpc.v1.cri".registry]
  config_path = "$work/certs.d"
TOML
containerd --config "$work/config.toml" > "$work/containerd.log" 2>&1 &
echo $! > "$work/pid"
for _ in $(seq 100); do [ -S "$work/containerd.sock" ] && break; sleep 0.1; done
export K1S_CRI_ENDPOINT="unix://$work/containerd.sock"

# Every step selects the whole workspace: cargo unifies features per package selection, and
# each other selection (`-p k1s`, `--exclude k1s`) built RocksDB's C++ again (~10 min) for its
# own feature set. The test targets come from cargo metadata, so a new test file is never left out.
cargo build --workspace --bins --tests
mapfile -t integration < <(cargo metadata --no-deps --format-version 1 | python3 -c '
import json, sys
for p in json.load(sys.stdin)["packages"]:
    for t in p["targets"]:
        if "test" in t["kind"] and not t["name"].startswith("e2e_"):
            print("--test=" + t["name"])
')
# Unit, doc and integration tests, two at a time.
cargo test --workspace --doc
cargo test --workspace --lib --bins "${integration[@]}" -- --test-threads="${K1S_TEST_THREADS:-2}"
# The API integration tests of cmd/k1s again, on etcd v3: each server gets an etcd of its own on
# loopback (Debian's etcd-server). `snapshot` tests the embedded store's own snapshots, `join`
# starts the etcd its servers share itself and `crash_rounds` runs on both stores by itself:
# they stay out.
mapfile -t on_etcd < <(cargo metadata --no-deps --format-version 1 | python3 -c '
import json, sys
for p in json.load(sys.stdin)["packages"]:
    if p["name"] != "k1s":
        continue
    for t in p["targets"]:
        if "test" in t["kind"] and not t["name"].startswith("e2e_") and t["name"] not in ("snapshot", "join", "crash_rounds"):
            print("--test=" + t["name"])
')
K1S_TEST_DATASTORE=etcd cargo test --workspace "${on_etcd[@]}" -- --test-threads="${K1S_TEST_THREADS:-2}"
# End to end: one node at a time (each owns the nftables table, cluster DNS address, cni0).
cargo test --workspace --test 'e2e_*' -- --test-threads=1
