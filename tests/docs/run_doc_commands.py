#!/usr/bin/env python3
"""Runs the commands of one Markdown document, as a reader would type them (ctest's Docs.* tests).

Every fenced block whose info string is `sh` is a list of commands. The blocks of one document run
in order, each as its own `bash -euo pipefail` script, in one scratch directory that looks like the
repository's root: every top-level entry of the repository is linked there, and `build` links to
the build directory under test, so `build/bin/hfuse models/cbrm.json` works as written and whatever
the commands write stays in the scratch directory. `build/bin` is also on PATH.

A block that cannot run as written in a test says so on the line before its fence, and what runs in
its place, which the reader sees beside it:

    <!-- doc-test: instead: COMMANDS -->

(for the set-up commands themselves, and for tools that need the optional peers). The test fails
when a block fails, when a block names a directive it does not know, when a fence in another shell
dialect (`bash`, `shell`, `console`, or none) holds what looks like a command (commands belong in
`sh` blocks, which run), or when a relative link points at a file that does not exist.

Usage: run_doc_commands.py DOC --root REPO --build BUILD_DIR --scratch DIR [--timeout S]
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import time

FENCE = re.compile(r"^(\s*)(```+|~~~+)\s*([^`\s]*)")
DIRECTIVE = re.compile(r"^\s*<!--\s*doc-test:\s*(\w[\w-]*)\s*:?\s*(.*?)\s*-->\s*$")
# A line in a non-sh fence that a reader would take for a command to type.
COMMANDISH = re.compile(r"^\s*(\$ |build/bin/|tools/|bench/|cmake |ctest|hfuse )")
LINK = re.compile(r"\]\(([^)\s]+)\)")


class Block:
    def __init__(self, line, lang, text, directive):
        self.line, self.lang, self.text, self.directive = line, lang, text, directive


def parse(path):
    """The fenced blocks of a Markdown file, each with the directive on the line before it."""
    lines = open(path, encoding="utf-8").read().split("\n")
    blocks, errors, i = [], [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, lang, start = m.group(2), m.group(3), i
        directive = None
        if start > 0:
            d = DIRECTIVE.match(lines[start - 1])
            if d:
                directive = (d.group(1), d.group(2))
        body = []
        i += 1
        while i < len(lines) and not lines[i].strip().startswith(fence):
            body.append(lines[i])
            i += 1
        if i == len(lines):
            errors.append(f"{path}:{start + 1}: a fence that is never closed")
        blocks.append(Block(start + 1, lang, "\n".join(body), directive))
        i += 1
    # Directives not directly before a fence are mistakes too.
    for n, line in enumerate(lines):
        if DIRECTIVE.match(line) and not (n + 1 < len(lines) and FENCE.match(lines[n + 1])):
            errors.append(f"{path}:{n + 1}: a doc-test directive must be on the line before a fence")
    return lines, blocks, errors


def check_links(path, lines, root):
    errors, in_fence = [], False
    for n, line in enumerate(lines):
        if FENCE.match(line):
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        for target in LINK.findall(line):
            if re.match(r"^[a-z]+:", target) or target.startswith("#"):
                continue
            file_part = target.split("#")[0]
            resolved = os.path.normpath(os.path.join(os.path.dirname(path), file_part))
            if not os.path.exists(resolved):
                errors.append(f"{path}:{n + 1}: link to '{target}', which does not exist")
    return errors


def make_scratch(scratch, root, build):
    if os.path.exists(scratch):
        shutil.rmtree(scratch)
    os.makedirs(scratch)
    for entry in os.listdir(root):
        if entry in ("build", ".git"):
            continue
        os.symlink(os.path.join(root, entry), os.path.join(scratch, entry))
    os.symlink(build, os.path.join(scratch, "build"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("doc")
    ap.add_argument("--root", required=True)
    ap.add_argument("--build", required=True)
    ap.add_argument("--scratch", required=True)
    ap.add_argument("--timeout", type=float, default=600, help="seconds per block")
    a = ap.parse_args()
    root, build = os.path.abspath(a.root), os.path.abspath(a.build)
    doc = os.path.abspath(a.doc)
    rel = os.path.relpath(doc, root)

    lines, blocks, errors = parse(doc)
    errors += check_links(doc, lines, root)
    for b in blocks:
        if b.directive and b.directive[0] != "instead":
            errors.append(f"{rel}:{b.line}: unknown doc-test directive '{b.directive[0]}' (known: instead)")
        if b.directive and b.lang != "sh":
            errors.append(f"{rel}:{b.line}: a doc-test directive on a '{b.lang or 'plain'}' block (only sh blocks run)")
        if b.lang in ("", "bash", "shell", "console", "zsh"):
            for k, line in enumerate(b.text.split("\n")):
                if COMMANDISH.match(line):
                    errors.append(f"{rel}:{b.line + 1 + k}: a command in a '{b.lang or 'plain'}' fence: "
                                  "commands go in ```sh blocks, which this test runs (output in ```text)")
                    break
    if errors:
        print("\n".join(errors), file=sys.stderr)
        return 1

    make_scratch(a.scratch, root, build)
    env = dict(os.environ)
    env["PATH"] = os.path.join(build, "bin") + os.pathsep + env.get("PATH", "")
    ran = 0
    for b in blocks:
        if b.lang != "sh":
            continue
        script = b.directive[1] if b.directive else b.text
        how = "instead: " if b.directive else ""
        print(f"--- {rel}:{b.line}: {how}{script.strip()}", flush=True)
        t0 = time.time()
        try:
            p = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=a.scratch, env=env,
                               timeout=a.timeout, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        except subprocess.TimeoutExpired:
            print(f"{rel}:{b.line}: the block ran past {a.timeout:.0f} s", file=sys.stderr)
            return 1
        out = p.stdout
        if len(out) > 6000:
            out = out[:3000] + "\n[...]\n" + out[-3000:]
        print(out, end="" if out.endswith("\n") or not out else "\n")
        if p.returncode != 0:
            print(f"{rel}:{b.line}: the block exited with status {p.returncode}", file=sys.stderr)
            return 1
        print(f"--- ok in {time.time() - t0:.1f} s", flush=True)
        ran += 1
    print(f"{rel}: {ran} block(s) ran, every one succeeded")
    return 0


if __name__ == "__main__":
    sys.exit(main())
