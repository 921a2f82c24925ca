#!/usr/bin/env python3
"""The soak (issue 34): a node-mode `k1s server` under steady churn, then its figures.

For K1S_SOAK_MINUTES (default 30): a Deployment scaled between 1 and 6 replicas every 20 s, a
pod created and deleted every 10 s, a Service created and deleted every 10 s, and 200 watches
(pods, services, endpointslices, events) held open all along. Every 30 s it prints the server's
RSS, open file descriptors and async tasks (from /metrics). The figures compared are taken in
the same settled state (3 replicas, no churn object left, 20 s of quiet) after warm-up (a
fifth of the run) and at the end: their growth, the store's size on disk at the end (the server
compacts old revisions every five minutes; `du` of the store folder), and the server log's
ERROR lines. It exits non-zero when a target is missed: RSS growth under 10%, no growth in
file descriptors or tasks (a tolerance of 5 descriptors for connections closing), no error
lines.

At the end it deletes its pods and stops the server (a stopped k1s leaves containers running, by
design), then kills and unmounts whatever still refers to its work dir.

Needs root, containerd and the local registry's images (hack/registry.sh start &&
hack/images.sh), and no other node-mode k1s on the host. Usage:

  K1S_SOAK_MINUTES=30 hack/soak.py [path/to/k1s]
"""

import json
import os
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

MINUTES = float(os.environ.get("K1S_SOAK_MINUTES", "30"))
WATCHES = int(os.environ.get("K1S_SOAK_WATCHES", "200"))
IMAGE = "127.0.0.1:5000/busybox:1.36"


def k1s_binary():
    if len(sys.argv) > 1:
        return sys.argv[1]
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(os.path.dirname(__file__), "..", "target"))
    for profile in ("release", "debug"):
        p = os.path.join(target, profile, "k1s")
        if os.path.exists(p):
            return p
    sys.exit("soak: no k1s binary (build one, or pass its path)")


class Server:
    def __init__(self, binary, work):
        self.work = work
        self.data = os.path.join(work, "data")
        self.kubeconfig = os.path.join(work, "kubeconfig.yaml")
        self.log = os.path.join(work, "server.log")
        open(os.path.join(work, "config.yaml"), "w").close()
        args = [
            binary, "server",
            "--https-listen-port=0", "--bind-address=127.0.0.1", "--kubelet-port=0",
            "--pause-image=127.0.0.1:5000/pause:3.10", "--cluster-dns-upstream=none",
            f"--config={work}/config.yaml", f"--data-dir={self.data}", f"--run-dir={work}/run",
            f"--pod-log-dir={work}/logs", f"--write-kubeconfig={self.kubeconfig}",
        ]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=open(self.log, "w"))
        for _ in range(600):
            if os.path.exists(self.kubeconfig):
                break
            if self.proc.poll() is not None:
                sys.exit(f"soak: the server exited at start; see {self.log}")
            time.sleep(0.1)
        tls = os.path.join(self.data, "server", "tls")
        self.ctx = ssl.create_default_context(cafile=os.path.join(tls, "server-ca.crt"))
        self.ctx.load_cert_chain(os.path.join(tls, "client-admin.crt"), os.path.join(tls, "client-admin.key"))
        server_line = next(l for l in open(self.kubeconfig) if "server:" in l)
        self.url = server_line.split("server:", 1)[1].strip()

    def kubectl(self, *args, stdin=None, check=False):
        r = subprocess.run(["kubectl", f"--kubeconfig={self.kubeconfig}", *args], input=stdin,
                           capture_output=True, text=True)
        if check and r.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(args)}: {r.stderr}")
        return r

    def get(self, path, timeout=10):
        return urllib.request.urlopen(self.url + path, context=self.ctx, timeout=timeout)

    def sample(self):
        text = self.get("/metrics").read().decode()
        out = {}
        for line in text.splitlines():
            for name in ("process_resident_memory_bytes", "process_open_fds", "k1s_runtime_alive_tasks"):
                if line.startswith(name + " "):
                    out[name] = float(line.split()[-1])
        return out

    def stop(self):
        """Removes the soak's pods (a stopped k1s leaves containers running, by design), stops
        the server, then kills and unmounts whatever still refers to the work dir."""
        self.kubectl("delete", "deployment", "--all", "--wait=false")
        self.kubectl("delete", "pods", "--all", "--grace-period=0", "--force", "--wait=false")
        for _ in range(120):
            if not self.kubectl("get", "pods", "-o", "name").stdout.strip():
                break
            time.sleep(0.5)
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        subprocess.run(["pkill", "-KILL", "-f", self.work])
        pods = os.path.join(self.data, "agent", "kubelet", "pods")
        for uid in os.listdir(pods) if os.path.isdir(pods) else []:
            for root in ("/sys/fs/cgroup/pids", "/sys/fs/cgroup/memory", "/sys/fs/cgroup"):
                for d, _, files in os.walk(os.path.join(root, "k1s", "pod" + uid)):
                    if "cgroup.procs" in files:
                        for pid in open(os.path.join(d, "cgroup.procs")).read().split():
                            subprocess.run(["kill", "-KILL", pid])
        points = [l.split()[4] for l in open("/proc/self/mountinfo") if l.split()[4].startswith(self.work)]
        for mp in sorted(points, key=len, reverse=True):
            subprocess.run(["umount", "-l", mp])


def watcher(server, path, stop, broken):
    """Holds a watch open, reopening it when the server ends it (as clients do)."""
    while not stop.is_set():
        try:
            with server.get(path + ("&" if "?" in path else "?") + "watch=true&timeoutSeconds=600", timeout=700) as r:
                for _ in r:
                    if stop.is_set():
                        return
        except Exception:
            if not stop.is_set():
                broken.append(path)
                time.sleep(1)


def main():
    binary = k1s_binary()
    work = tempfile.mkdtemp(prefix="k1s-soak.")
    server = Server(binary, work)
    print(f"soak: {binary}, {MINUTES} minutes, {WATCHES} watches, work dir {work}", flush=True)
    for _ in range(300):
        r = server.kubectl("get", "nodes", "-o",
                           "jsonpath={.items[0].status.conditions[?(@.type==\"Ready\")].status}")
        if r.stdout.strip() == "True":
            break
        time.sleep(0.5)
    else:
        sys.exit("soak: the node never became Ready")
    server.kubectl("create", "deployment", "soak-web", f"--image={IMAGE}", "--", "sleep", "100000", check=True)
    stop, broken = threading.Event(), []
    paths = ["/api/v1/pods", "/api/v1/services", "/apis/discovery.k8s.io/v1/endpointslices", "/api/v1/events"]
    threads = [threading.Thread(target=watcher, args=(server, paths[i % len(paths)], stop, broken), daemon=True)
               for i in range(WATCHES)]
    for t in threads:
        t.start()
    def settled(tick):
        """3 replicas, the churn objects gone, 20 s of quiet: then a sample."""
        server.kubectl("scale", "deployment", "soak-web", "--replicas=3")
        server.kubectl("delete", "pod", f"churn-{tick - 1}", "--ignore-not-found")
        server.kubectl("delete", "service", f"churn-{tick - 1}", "--ignore-not-found")
        time.sleep(20)
        return server.sample()

    start = time.time()
    end = start + MINUTES * 60
    warm = start + MINUTES * 60 / 5
    samples, tick, baseline = [], 0, None
    while time.time() < end:
        if baseline is None and time.time() >= warm:
            baseline = settled(tick)
        if tick % 2 == 0:
            server.kubectl("scale", "deployment", "soak-web", f"--replicas={1 + (tick // 2) % 6}")
        server.kubectl("run", f"churn-{tick}", f"--image={IMAGE}", "--restart=Never", "--", "true")
        server.kubectl("delete", "pod", f"churn-{tick - 1}", "--wait=false", "--ignore-not-found")
        server.kubectl("create", "service", "clusterip", f"churn-{tick}", "--tcp=80:8080")
        server.kubectl("delete", "service", f"churn-{tick - 1}", "--ignore-not-found")
        if tick % 3 == 0:
            s = server.sample()
            s["t"] = time.time() - start
            samples.append(s)
            print(f"soak: {s['t']:7.0f} s  RSS {s.get('process_resident_memory_bytes', 0) / 2**20:6.1f} MiB  "
                  f"fds {s.get('process_open_fds', 0):5.0f}  tasks {s.get('k1s_runtime_alive_tasks', 0):6.0f}",
                  flush=True)
        tick += 1
        time.sleep(max(0.0, start + tick * 10 - time.time()))
    last = settled(tick)
    stop.set()
    baseline = baseline or samples[0]
    rss_growth = 100.0 * (last["process_resident_memory_bytes"] / baseline["process_resident_memory_bytes"] - 1)
    fds = (baseline["process_open_fds"], last["process_open_fds"])
    tasks = (baseline.get("k1s_runtime_alive_tasks", 0), last.get("k1s_runtime_alive_tasks", 0))
    server.stop()
    store = os.path.join(server.data, "server", "db")
    size = subprocess.run(["du", "-sb", store], capture_output=True, text=True).stdout.split()
    errors = [l for l in open(server.log) if " ERROR " in l]
    print()
    print(f"soak: {MINUTES} minutes, {tick} churn rounds, {WATCHES} watches ({len(broken)} reopened)")
    print(f"  RSS after warm-up {baseline['process_resident_memory_bytes'] / 2**20:.1f} MiB, at the end "
          f"{last['process_resident_memory_bytes'] / 2**20:.1f} MiB: {rss_growth:+.1f}% (target: under +10%)")
    print(f"  open file descriptors {fds[0]:.0f} -> {fds[1]:.0f} (target: no growth)")
    print(f"  async tasks {tasks[0]:.0f} -> {tasks[1]:.0f} (target: no growth)")
    print(f"  store on disk: {int(size[0]) / 2**20 if size else 0:.1f} MiB ({store})")
    print(f"  ERROR lines in the server log: {len(errors)} (target: 0)")
    for l in errors[:10]:
        print("    " + l.rstrip())
    ok = rss_growth < 10 and fds[1] <= fds[0] + 5 and tasks[1] <= tasks[0] and not errors
    if ok:
        shutil.rmtree(work, ignore_errors=True)
    else:
        print(f"soak: a target was missed; the work dir stays: {work}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
