#!/bin/sh
# Stops k1s, its containerd and every pod (shims, mounts, network namespaces); keeps the data dir.
# Flags: those of `k1s killall` (--data-dir, or K1S_DATA_DIR).
set -e
exec k1s killall "$@"
