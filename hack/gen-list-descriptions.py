#!/usr/bin/env python3
"""Generates pkg/api/src/openapi/list_descriptions.json: the OpenAPI descriptions of the
`<Kind>List` definitions k1s serves, as upstream Kubernetes v1.35 serves them.

Upstream's openapi-gen (k8s.io/kube-openapi) takes a definition's description from the Go doc
comment of its type and a property's description from the doc comment of its field. This script
reads the List types' Go sources from git mirrors of k8s.io/api, k8s.io/apiextensions-apiserver,
k8s.io/kube-aggregator and k8s.io/metrics at fixed tags and forms those descriptions the same way:

- a comment is the comment group ending on the line before the type name or field (gengo's
  `priorCommentLines`), read as go/ast's `CommentGroup.Text()` reads it (`//` and one following
  space dropped, `//go:`-style directives dropped, trailing white space trimmed, leading blank
  lines dropped and runs of blank lines made one);
- kube-openapi's `generateDescription` then stops at a `---` line, drops `+tag` lines and
  one-line `TODO`s, joins lines with a space, keeps a blank line as a paragraph break, puts an
  indented line on its own line, and trims the result.

For every `*List` struct of every package below (the group-versions k1s serves) the output holds
the type's description and those of its `metadata` and `items` fields, keyed by OpenAPI
definition name. A description a comment does not give is left out.

Usage: hack/gen-list-descriptions.py [--mirrors DIR] [--check]
  --mirrors DIR  directory holding the bare mirrors as DIR/kubernetes+<repo>/repo
                 (default /work/.mirror)
  --check        compare with the checked-in file instead of writing it; exit 1 if it differs

Python 3.11, standard library only; the output is deterministic (sorted keys).
"""

import argparse
import json
import os
import re
import subprocess
import sys

# (repository, tag, package directory, OpenAPI definition prefix). One entry per group-version
# k1s serves (pkg/api/src/resources.rs); a served kind missing here fails the registry's tests.
PACKAGES = [
    ("api", "v0.35.7", "core/v1", "io.k8s.api.core.v1"),
    ("api", "v0.35.7", "admissionregistration/v1", "io.k8s.api.admissionregistration.v1"),
    ("api", "v0.35.7", "apps/v1", "io.k8s.api.apps.v1"),
    ("api", "v0.35.7", "authentication/v1", "io.k8s.api.authentication.v1"),
    ("api", "v0.35.7", "authorization/v1", "io.k8s.api.authorization.v1"),
    ("api", "v0.35.7", "autoscaling/v1", "io.k8s.api.autoscaling.v1"),
    ("api", "v0.35.7", "autoscaling/v2", "io.k8s.api.autoscaling.v2"),
    ("api", "v0.35.7", "batch/v1", "io.k8s.api.batch.v1"),
    ("api", "v0.35.7", "certificates/v1", "io.k8s.api.certificates.v1"),
    ("api", "v0.35.7", "coordination/v1", "io.k8s.api.coordination.v1"),
    ("api", "v0.35.7", "discovery/v1", "io.k8s.api.discovery.v1"),
    ("api", "v0.35.7", "events/v1", "io.k8s.api.events.v1"),
    ("api", "v0.35.7", "networking/v1", "io.k8s.api.networking.v1"),
    ("api", "v0.35.7", "node/v1", "io.k8s.api.node.v1"),
    ("api", "v0.35.7", "policy/v1", "io.k8s.api.policy.v1"),
    ("api", "v0.35.7", "rbac/v1", "io.k8s.api.rbac.v1"),
    ("api", "v0.35.7", "scheduling/v1", "io.k8s.api.scheduling.v1"),
    ("api", "v0.35.7", "storage/v1", "io.k8s.api.storage.v1"),
    (
        "apiextensions-apiserver",
        "v0.35.7",
        "pkg/apis/apiextensions/v1",
        "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1",
    ),
    (
        "kube-aggregator",
        "v0.35.6",
        "pkg/apis/apiregistration/v1",
        "io.k8s.kube-aggregator.pkg.apis.apiregistration.v1",
    ),
    ("metrics", "v0.35.6", "pkg/apis/metrics/v1beta1", "io.k8s.metrics.pkg.apis.metrics.v1beta1"),
]

OUTPUT = "pkg/api/src/openapi/list_descriptions.json"
FIELDS = ("metadata", "items")

TYPE_RE = re.compile(r"^type\s+(\w+List)\s+struct\s*\{\s*$")
JSON_TAG_RE = re.compile(r'json:"([^",]*)')


def git(git_dir, *args):
    return subprocess.run(
        ["git", "--git-dir", git_dir, *args], check=True, capture_output=True, text=True
    ).stdout


def source_files(git_dir, tag, directory):
    """The hand-written Go files of a package: generated code and tests carry no doc comments
    of their own."""
    names = git(git_dir, "ls-tree", "--name-only", f"{tag}:{directory}").split("\n")
    for name in sorted(n for n in names if n.endswith(".go")):
        if name.endswith("_test.go") or name.startswith("zz_generated") or "generated" in name:
            continue
        yield name, git(git_dir, "show", f"{tag}:{directory}/{name}")


def is_directive(text):
    """go/ast's isDirective, on a comment's text after `//`."""
    if text.startswith(("line ", "extern ", "export ")):
        return True
    colon = text.find(":")
    if colon <= 0 or colon + 1 >= len(text):
        return False
    for i in range(colon + 2):
        if i == colon:
            continue
        if not ("a" <= text[i] <= "z" or "0" <= text[i] <= "9"):
            return False
    return True


def comment_text_lines(comments):
    """go/ast CommentGroup.Text() of a group of `//` comments, split into lines as gengo's
    splitLines does."""
    lines = []
    for c in comments:
        text = c[2:]
        if text:
            if text[0] == " ":
                text = text[1:]
            elif is_directive(text):
                continue
        lines.append(text.rstrip(" \t\n\r"))
    out = []
    for line in lines:
        if line != "" or (out and out[-1] != ""):
            out.append(line)
    while out and out[-1] == "":
        out.pop()
    return out


def description(comment_lines):
    """kube-openapi's generateDescription."""
    buffer = ""
    for line in comment_lines:
        if line == "---":
            break
        line = line.rstrip(" ")
        leading = line.lstrip(" ")
        if len(line) == 0:
            buffer = buffer[:-1]
            buffer += "\n\n"
        elif leading.startswith("TODO") or leading.startswith("+"):
            pass
        else:
            if line.startswith(" ") or line.startswith("\t"):
                buffer = buffer[:-1]
                line = "\n" + line + "\n"
            else:
                line += " "
            buffer += line
    # Go's strings.TrimSpace.
    return buffer.strip(" \t\n\r\v\f")


def prior_comment(lines, index, where):
    """The `//` comment group ending on the line before `lines[index]`, outermost first."""
    group = []
    i = index - 1
    while i >= 0:
        stripped = lines[i].strip()
        if not stripped.startswith("//"):
            if "*/" in stripped:
                raise SystemExit(f"{where}:{index + 1}: a block comment before it is not handled")
            break
        group.append(stripped)
        i -= 1
    group.reverse()
    return group


def list_types(text, where):
    lines = text.split("\n")
    for index, line in enumerate(lines):
        m = TYPE_RE.match(line)
        if not m:
            continue
        name = m.group(1)
        entry = {}
        type_description = description(comment_text_lines(prior_comment(lines, index, where)))
        if type_description:
            entry["description"] = type_description
        end = index + 1
        fields = {}
        while lines[end] != "}":
            body = lines[end].strip()
            if body and not body.startswith("//"):
                tag = JSON_TAG_RE.search(body)
                if tag and tag.group(1) in FIELDS:
                    fields[tag.group(1)] = description(comment_text_lines(prior_comment(lines, end, where)))
            end += 1
        if "items" not in fields:
            continue  # not a list kind
        for field in FIELDS:
            if fields.get(field):
                entry[field] = fields[field]
        yield name, entry


def generate(mirrors):
    out = {}
    for repo, tag, directory, prefix in PACKAGES:
        git_dir = os.path.join(mirrors, f"kubernetes+{repo}", "repo")
        for file_name, text in source_files(git_dir, tag, directory):
            for name, entry in list_types(text, f"{repo}@{tag}:{directory}/{file_name}"):
                key = f"{prefix}.{name}"
                if key in out:
                    raise SystemExit(f"{key} declared twice")
                out[key] = entry
    sources = sorted({f"k8s.io/{repo}@{tag}" for repo, tag, _, _ in PACKAGES})
    doc = {
        "generator": "hack/gen-list-descriptions.py",
        "sources": sources,
        "lists": dict(sorted(out.items())),
    }
    return json.dumps(doc, indent=2, sort_keys=False, ensure_ascii=False) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mirrors", default="/work/.mirror")
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    path = os.path.join(root, OUTPUT)
    text = generate(args.mirrors)
    if args.check:
        with open(path, encoding="utf-8") as f:
            if f.read() != text:
                print(f"{OUTPUT} is out of date: run hack/gen-list-descriptions.py", file=sys.stderr)
                return 1
        return 0
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
