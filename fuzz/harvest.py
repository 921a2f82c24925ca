#!/usr/bin/env python3
"""Writes the fuzz targets' seed corpora (fuzz/corpus/<target>/) from k1s's own tests: the
object bodies, patches, selectors, request paths and CEL expressions they send, and the
protobuf bodies of pkg/api's test data. Run it again after adding tests; the files are kept in
the repository so that every run starts from the same seeds.

    python3 fuzz/harvest.py
"""

import glob
import hashlib
import json
import os
import re
import shutil

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "fuzz", "corpus")
SOURCES = sorted(
    glob.glob(os.path.join(ROOT, "cmd/k1s/tests/*.rs"))
    + glob.glob(os.path.join(ROOT, "e2e/*.rs"))
    + glob.glob(os.path.join(ROOT, "pkg/*/tests/*.rs"))
    + glob.glob(os.path.join(ROOT, "pkg/**/tests.rs"), recursive=True)
    + glob.glob(os.path.join(ROOT, "pkg/**/*tests*.rs"), recursive=True)
)
# The longest seed kept: big seeds slow every mutation of them down.
MAX_SEED = 16 * 1024
# Seeds kept per target (a deterministic sample past that): more mostly repeat each other.
MAX_SEEDS = 200


def rust_strings(text):
    """Raw strings (r"..", r#".."#) and plain "..." literals, with the usual escapes undone."""
    out = []
    for m in re.finditer(r'r(#+)"(.*?)"\1', text, re.S):
        out.append(m.group(2))
    for m in re.finditer(r'r"([^"]*)"', text):
        out.append(m.group(1))
    for m in re.finditer(r'(?<![r#\w])"((?:[^"\\\n]|\\.)*)"', text):
        s = m.group(1)
        s = s.replace('\\"', '"').replace("\\n", "\n").replace("\\t", "\t").replace("\\\\", "\\")
        out.append(s)
    return out


def load_yaml_docs(s):
    try:
        import yaml  # noqa: F401  (optional: python3-yaml)
    except ImportError:
        return []
    import yaml

    try:
        return [d for d in yaml.safe_load_all(s) if isinstance(d, dict)]
    except Exception:
        return []


def main():
    seeds = {t: set() for t in ["body_json", "body_yaml", "body_protobuf", "patch", "selectors", "request", "cel", "auth_headers"]}
    objects = []
    patches = []
    for path in SOURCES:
        text = open(path, encoding="utf-8").read()
        strings = rust_strings(text)
        for s in strings:
            st = s.strip()
            if len(s) > MAX_SEED:
                continue
            # Object bodies, JSON.
            if st.startswith("{") or st.startswith("["):
                try:
                    v = json.loads(st)
                except Exception:
                    v = None
                if isinstance(v, dict) and "kind" in v and "apiVersion" in v:
                    seeds["body_json"].add(st)
                    objects.append(v)
                elif isinstance(v, (dict, list)):
                    patches.append(v)
            # Object bodies, YAML.
            if "apiVersion:" in s and "kind:" in s:
                seeds["body_yaml"].add(s)
                for d in load_yaml_docs(s):
                    if "kind" in d and "apiVersion" in d:
                        objects.append(d)
                        seeds["body_json"].add(json.dumps(d))
            # Request paths.
            if re.match(r"^/apis?/", st) and " " not in st:
                for method in ["GET", "POST", "PUT", "PATCH", "DELETE"]:
                    seeds["request"].add(f"{method} {st}\nAccept: application/json\nContent-Type: application/json")
            # CEL expressions (the CEL crate's tests and policies' rules).
            if path.startswith(os.path.join(ROOT, "pkg/cel")) and 0 < len(st) < 400 and "\n" not in st:
                seeds["cel"].add(st)
        # Selectors: kubectl -l / --selector / --field-selector arguments and query parameters.
        for m in re.finditer(r'"(?:-l|--selector|--field-selector|-L)",\s*"([^"]+)"', text):
            seeds["selectors"].add(m.group(1))
        for m in re.finditer(r'"(?:--selector|--field-selector)=([^"]+)"', text):
            seeds["selectors"].add(m.group(1))
        for m in re.finditer(r"(?:labelSelector|fieldSelector)=([^&\"]+)", text):
            seeds["selectors"].add(m.group(1).replace("%3D", "=").replace("%2C", ",").replace("%21", "!"))
        for m in re.finditer(r'(?:expression|rule|message[Ee]xpression):\s*"?(.+?)"?\s*$', text, re.M):
            seeds["cel"].add(m.group(1).strip().strip("'"))
    for yaml_file in glob.glob(os.path.join(ROOT, "deploy/manifests/*.yaml")):
        s = open(yaml_file, encoding="utf-8").read()
        seeds["body_yaml"].add(s)
        for d in load_yaml_docs(s):
            objects.append(d)
    for pb in glob.glob(os.path.join(ROOT, "pkg/api/src/protobuf/testdata/*.pb")):
        seeds["body_protobuf"].add(open(pb, "rb").read())
    for js in glob.glob(os.path.join(ROOT, "pkg/api/src/protobuf/testdata/*.json")):
        seeds["body_json"].add(open(js, encoding="utf-8").read().strip())

    # Patches: each patch literal of the tests against an object of each kind they create.
    by_kind = {}
    for o in objects:
        by_kind.setdefault(o.get("kind"), o)
    originals = [o for k, o in sorted(by_kind.items(), key=lambda kv: str(kv[0])) if k][:24]
    for i, p in enumerate(patches):
        for j, o in enumerate(originals):
            if (i + j) % 6:
                continue
            if isinstance(p, list):
                seeds["patch"].add(json.dumps({"type": "json", "original": o, "patch": p}))
            else:
                for t in ["merge", "strategic"]:
                    seeds["patch"].add(json.dumps({"type": t, "original": o, "patch": p}))
    for o in originals:
        seeds["patch"].add(json.dumps({"type": "apply", "original": None, "patch": o}))
        seeds["patch"].add(json.dumps({"type": "apply", "original": o, "patch": o, "manager": "fuzz"}))

    # Authentication headers: the shapes each authenticator reads.
    seeds["auth_headers"].update(
        [
            "Authorization: Bearer abcdef.0123456789abcdef",
            "Authorization: bearer  some-static-token ",
            "Authorization: Basic YWxhZGRpbjpvcGVuc2VzYW1l",
            "Authorization: Bearer eyJhbGciOiJFUzI1NiJ9.eyJpc3MiOiJodHRwczovL2t1YmVybmV0ZXMuZGVmYXVsdC5zdmMifQ.c2ln",
            'Jwt-Json: {"alg":"ES256","kid":"ec"}|{"iss":"https://issuer.example","aud":"k1s","sub":"jane","exp":1900000000,"hd":"example.com","groups":["dev"]}|sig',
            'Jwt-Json: {"alg":"RS256"}|{"iss":"https://kubernetes.default.svc.cluster.local","aud":["https://kubernetes.default.svc.cluster.local"],"sub":"system:serviceaccount:default:sa","exp":1900000000,"kubernetes.io":{"namespace":"default","serviceaccount":{"name":"sa","uid":"u"},"pod":{"name":"p","uid":"v"}}}|',
            "Impersonate-User: jane\nImpersonate-Group: dev\nImpersonate-Group: ops\nImpersonate-Uid: 1234\nImpersonate-Extra-Scopes: view",
            "Impersonate-User: system:serviceaccount:default:sa",
            "Impersonate-Group: only-a-group",
            "Impersonate-User: jane\nImpersonate-Extra-acme.com%2Fproject: p",
        ]
    )
    seeds["selectors"].update(["", "app", "!app", "app in (a,b)", "app notin (a)", "a=b,c!=d", "x>1", "metadata.name=a,spec.nodeName!=b"])
    seeds["cel"].update(["self.spec.replicas <= 5", "object.metadata.name.startsWith('a')", "has(self.spec)"])

    if os.path.isdir(OUT):
        shutil.rmtree(OUT)
    for target, items in seeds.items():
        d = os.path.join(OUT, target)
        os.makedirs(d, exist_ok=True)
        kept = {}
        for item in items:
            data = item if isinstance(item, bytes) else item.encode()
            if data and len(data) <= MAX_SEED:
                kept[hashlib.sha256(data).hexdigest()[:16]] = data
        for name in sorted(kept)[:MAX_SEEDS]:
            data = kept[name]
            with open(os.path.join(d, name), "wb") as f:
                f.write(data)
        print(f"{target}: {len(os.listdir(d))} seeds")


if __name__ == "__main__":
    main()
