#!/bin/sh
# Removes k1s from this host: `k1s killall`, then what k1s created (nftables table, routing rules,
# k1s-dns0, cni0 and the CNI state, pod logs, the data dir, /etc/k1s unless --keep-config).
# On a Debian package install, remove the package itself with `apt-get purge k1s` afterwards.
set -e
exec k1s uninstall "$@"
