#!/usr/bin/env bash
# A local plain-HTTP image registry for tests: `docker-registry serve` on 127.0.0.1:5000 with
# filesystem storage. Usage: hack/registry.sh [start|stop|status]   (default: start)
#
#   start   idempotent: a registry already answering on the address is left alone
#   stop    stops only the registry this script started (its pid file), never another one
#   status  exit 0 when the registry answers, 1 otherwise
#
# Environment: K1S_REGISTRY_DIR (default /var/tmp/k1s-registry: config, storage, log, pid file),
# K1S_REGISTRY_ADDR (default 127.0.0.1:5000; keep it on loopback).
set -euo pipefail

DIR=${K1S_REGISTRY_DIR:-/var/tmp/k1s-registry}
ADDR=${K1S_REGISTRY_ADDR:-127.0.0.1:5000}
PIDFILE=$DIR/registry.pid
LOG=$DIR/registry.log
CONFIG=$DIR/config.yml

say() { echo "registry: $*" >&2; }
die() { say "ERROR: $*"; exit 1; }

answers() { curl -fsS -o /dev/null --max-time 2 "http://$ADDR/v2/" 2>/dev/null; }

# The pid in the pid file, when that process is still a docker-registry.
our_pid() {
  [ -f "$PIDFILE" ] || return 1
  local pid
  pid=$(cat "$PIDFILE")
  [ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q "docker-registry serve $CONFIG" || return 1
  echo "$pid"
}

start() {
  if answers; then
    say "already running on http://$ADDR"
    return 0
  fi
  command -v docker-registry >/dev/null || die "docker-registry not found (apt-get install docker-registry)"
  command -v curl >/dev/null || die "curl not found (apt-get install curl)"
  mkdir -p "$DIR/storage"
  cat >"$CONFIG" <<EOF
version: 0.1
log:
  level: warn
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: $DIR/storage
  delete:
    enabled: true
http:
  addr: $ADDR
  secret: k1s-local-test-registry
EOF
  if pid=$(our_pid); then
    die "pid $pid (from $PIDFILE) is running but http://$ADDR/v2/ does not answer; see $LOG"
  fi
  # Only stdio is inherited: a lock held by whoever started it (`flock /tmp/k1s-e2e.lock ...`)
  # must not live on in the daemon.
  python3 -c 'import os, sys; os.closerange(3, 1024); os.execvp(sys.argv[1], sys.argv[1:])' \
    setsid docker-registry serve "$CONFIG" >>"$LOG" 2>&1 </dev/null &
  echo $! >"$PIDFILE"
  local pid=$!
  for _ in $(seq 1 100); do
    if answers; then
      say "started on http://$ADDR (pid $pid, storage $DIR/storage)"
      return 0
    fi
    if ! kill -0 "$pid" 2>/dev/null; then
      rm -f "$PIDFILE"
      tail -n 20 "$LOG" >&2 || true
      die "docker-registry exited during start-up (log: $LOG)"
    fi
    sleep 0.1
  done
  tail -n 20 "$LOG" >&2 || true
  die "http://$ADDR/v2/ did not answer within 10 s (pid $pid, log: $LOG)"
}

stop() {
  local pid
  if ! pid=$(our_pid); then
    rm -f "$PIDFILE"
    if answers; then
      say "a registry answers on http://$ADDR but was not started by this script: left running"
    else
      say "not running"
    fi
    return 0
  fi
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 1 50); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then
    say "pid $pid ignored SIGTERM for 5 s: sending SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$PIDFILE"
  say "stopped (pid $pid)"
}

case "${1:-start}" in
  start) start ;;
  stop) stop ;;
  status)
    if answers; then say "running on http://$ADDR"; else say "not answering on http://$ADDR"; exit 1; fi
    ;;
  *) die "usage: $0 [start|stop|status]" ;;
esac
