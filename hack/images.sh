#!/usr/bin/env bash
# Builds the test images without internet and pushes them to the local registry:
#   busybox:1.36, busybox:latest   Debian's static /bin/busybox with its applets in /bin (cmd: sh)
#   pause:3.10                     the same layer, entrypoint `/bin/busybox sleep 2147483647`
# Built with umoci into an OCI layout (a cache: later runs only push), pushed with skopeo.
# Idempotent: a tag the registry already has is skipped. Starts the registry (hack/registry.sh)
# when it does not answer.
#
# Environment: K1S_REGISTRY_ADDR (default 127.0.0.1:5000), K1S_IMAGES_DIR (default
# /var/tmp/k1s-images: the OCI layout), K1S_IMAGES_REBUILD=1 rebuilds and re-pushes everything.
#
# Note: Debian 12 ships busybox 1.35 under the 1.36 tag; its `wget -T` segfaults, don't use -T.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ADDR=${K1S_REGISTRY_ADDR:-127.0.0.1:5000}
WORK=${K1S_IMAGES_DIR:-/var/tmp/k1s-images}
OCI=$WORK/oci
BUSYBOX=/bin/busybox
# name:tag in the registry -> tag in the OCI layout
IMAGES=("busybox:1.36 busybox" "busybox:latest busybox" "pause:3.10 pause")

bundle=""
trap '[ -z "$bundle" ] || rm -rf "$bundle"' EXIT

say() { echo "images: $*" >&2; }
die() { say "ERROR: $*"; exit 1; }

for tool in umoci skopeo curl; do
  command -v "$tool" >/dev/null || die "$tool not found (hack/install-deps.sh installs it)"
done
[ -x "$BUSYBOX" ] || die "$BUSYBOX not found (apt-get install busybox-static)"
if ldd "$BUSYBOX" >/dev/null 2>&1; then
  die "$BUSYBOX is dynamically linked: install busybox-static instead of busybox"
fi

case "$(uname -m)" in
  x86_64) ARCH=amd64 ;;
  aarch64) ARCH=arm64 ;;
  armv7l) ARCH=arm ;;
  *) ARCH=$(uname -m) ;;
esac

# Does the registry serve this name:tag? (HEAD on the manifest, any manifest media type)
in_registry() {
  local name=${1%%:*} tag=${1#*:}
  curl -fsS -o /dev/null -I --max-time 5 \
    -H 'Accept: application/vnd.oci.image.manifest.v1+json' \
    -H 'Accept: application/vnd.docker.distribution.manifest.v2+json' \
    -H 'Accept: application/vnd.oci.image.index.v1+json' \
    "http://$ADDR/v2/$name/manifests/$tag" 2>/dev/null
}

in_layout() { [ -d "$OCI" ] && umoci ls --layout "$OCI" 2>/dev/null | grep -qx "$1"; }

build() {
  local start=$SECONDS
  say "building busybox and pause from $BUSYBOX ($("$BUSYBOX" | head -n1 | cut -d' ' -f2)) into $OCI"
  rm -rf "$OCI"
  mkdir -p "$WORK"
  bundle=$(mktemp -d "$WORK/bundle.XXXXXX")
  umoci init --layout "$OCI"
  umoci new --image "$OCI:base"
  # umoci refuses to unpack into an existing directory
  rmdir "$bundle"
  umoci unpack --image "$OCI:base" "$bundle" >/dev/null
  local root=$bundle/rootfs
  mkdir -p "$root"/{bin,etc,root,home,var/www,dev,proc,sys}
  install -d -m 1777 "$root/tmp"
  install -m 0755 "$BUSYBOX" "$root/bin/busybox"
  local applet
  while read -r applet; do
    [ "$applet" = busybox ] || ln -sf busybox "$root/bin/$applet"
  done < <("$BUSYBOX" --list)
  printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/home:/bin/false\n' >"$root/etc/passwd"
  printf 'root:x:0:\nnobody:x:65534:\n' >"$root/etc/group"
  umoci repack --image "$OCI:busybox" "$bundle" >/dev/null
  umoci config --image "$OCI:busybox" --os linux --architecture "$ARCH" \
    --config.env 'PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --config.cmd sh --history.created_by 'k1s hack/images.sh: busybox'
  umoci config --image "$OCI:busybox" --tag pause --clear config.cmd \
    --config.entrypoint /bin/busybox --config.entrypoint sleep --config.entrypoint 2147483647 \
    --history.created_by 'k1s hack/images.sh: pause'
  umoci rm --image "$OCI:base"
  umoci gc --layout "$OCI"
  rm -rf "$bundle"
  say "built in $((SECONDS - start)) s"
}

if [ "${K1S_IMAGES_REBUILD:-0}" = 1 ]; then
  rm -rf "$OCI"
fi

"$HERE/registry.sh" start

todo=()
for entry in "${IMAGES[@]}"; do
  ref=${entry%% *}
  if [ "${K1S_IMAGES_REBUILD:-0}" != 1 ] && in_registry "$ref"; then
    say "$ADDR/$ref already in the registry"
  else
    todo+=("$entry")
  fi
done
((${#todo[@]})) || exit 0

if ! in_layout busybox || ! in_layout pause; then
  build
fi

for entry in "${todo[@]}"; do
  ref=${entry%% *}
  tag=${entry#* }
  skopeo copy --quiet --dest-tls-verify=false "oci:$OCI:$tag" "docker://$ADDR/$ref"
  in_registry "$ref" || die "pushed $ADDR/$ref but the registry does not serve it"
  say "pushed $ADDR/$ref"
done
