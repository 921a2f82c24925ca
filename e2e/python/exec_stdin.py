#!/usr/bin/env python3
"""Exec and attach with the official Python client (kubernetes.stream), as issue 16 reports it.

Usage: exec_stdin.py KUBECONFIG POD [NAMESPACE]

The pod runs a container `main` (any long-running command) and a container `reader` with
`stdin: true` that answers each line it reads with "got LINE". Prints one line per check
("ok ..." or "FAIL ...") and exits non-zero if any check failed.
"""
import sys
import traceback

from kubernetes import client, config
from kubernetes.stream import stream
from kubernetes.stream.ws_client import V4_CHANNEL_PROTOCOL, V5_CHANNEL_PROTOCOL

TIMEOUT = 20
failures = []


def check(name, got, want):
    if got == want:
        print(f"ok {name}: {got!r}", flush=True)
    else:
        print(f"FAIL {name}: got {got!r}, want {want!r}", flush=True)
        failures.append(name)


def open_stream(api, method, pod, ns, protocol, **kwargs):
    headers = {"sec-websocket-protocol": protocol} if protocol else None
    return stream(method, pod, ns, stdin=True, stdout=True, stderr=True, tty=False,
                  _preload_content=False, _headers=headers, **kwargs)


def finish(ws):
    """Waits for the server to end the session; the command's exit code."""
    ws.run_forever(timeout=TIMEOUT)
    if ws.is_open():
        ws.close()
        return "still running"
    return ws.returncode


def shell_reads_text_and_binary_stdin(api, pod, ns, protocol, label):
    ws = open_stream(api, api.connect_get_namespaced_pod_exec, pod, ns, protocol,
                     container="main", command=["sh"])
    check(f"{label} subprotocol", ws.subprotocol, protocol or V5_CHANNEL_PROTOCOL)
    ws.write_stdin("echo from-a-text-frame\n")  # str: a TEXT frame "\x00..."
    check(f"{label} text stdin", ws.readline_stdout(timeout=TIMEOUT), "from-a-text-frame")
    ws.write_stdin(b"echo from-a-binary-frame\n")  # bytes: a BINARY frame
    check(f"{label} binary stdin", ws.readline_stdout(timeout=TIMEOUT), "from-a-binary-frame")
    ws.write_stdin("exit 7\n")
    check(f"{label} exit code", finish(ws), 7)


def cat_exits_when_stdin_closes(api, pod, ns):
    ws = open_stream(api, api.connect_get_namespaced_pod_exec, pod, ns, None,
                     container="main", command=["cat"])
    check("v5 cat subprotocol", ws.subprotocol, V5_CHANNEL_PROTOCOL)
    ws.write_stdin("cat me\n")
    check("v5 cat echo", ws.readline_stdout(timeout=TIMEOUT), "cat me")
    ws.close_channel(0)  # v5: [255, 0], stdin EOF for cat
    check("v5 cat exit code after stdin closed", finish(ws), 0)


def attach_reads_text_and_binary_stdin(api, pod, ns):
    ws = open_stream(api, api.connect_get_namespaced_pod_attach, pod, ns, None, container="reader")
    check("attach subprotocol", ws.subprotocol, V5_CHANNEL_PROTOCOL)
    ws.write_stdin("text\n")
    check("attach text stdin", ws.readline_stdout(timeout=TIMEOUT), "got text")
    ws.write_stdin(b"binary\n")
    check("attach binary stdin", ws.readline_stdout(timeout=TIMEOUT), "got binary")
    ws.close()


def main():
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    kubeconfig, pod = sys.argv[1], sys.argv[2]
    ns = sys.argv[3] if len(sys.argv) > 3 else "default"
    config.load_kube_config(config_file=kubeconfig)
    api = client.CoreV1Api()
    checks = [
        lambda: shell_reads_text_and_binary_stdin(api, pod, ns, None, "v5"),
        lambda: shell_reads_text_and_binary_stdin(api, pod, ns, V4_CHANNEL_PROTOCOL, "v4"),
        lambda: cat_exits_when_stdin_closes(api, pod, ns),
        lambda: attach_reads_text_and_binary_stdin(api, pod, ns),
    ]
    for c in checks:
        try:
            c()
        except Exception:  # one broken check must not hide the others
            print("FAIL exception:", traceback.format_exc(), flush=True)
            failures.append("exception")
    if failures:
        print(f"{len(failures)} check(s) failed: {', '.join(failures)}", flush=True)
        return 1
    print("all checks passed", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
