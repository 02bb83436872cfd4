#!/usr/bin/env python3
"""Assembles the builtin("default") corpus from Debian-packaged text.

Four domains, documents kept as documents (one JSON object per line, with a
`text` and a `domain` field): prose (KJV Bible chapters, fortunes), reference
(Python documentation sources), code (Go standard library), math (Metamath
set.mm sections). Each domain is capped so that no one dominates; the order
is shuffled with a fixed seed so every machine builds the same file.
"""
import glob
import gzip
import json
import os
import random
import re
import subprocess
import sys

CAP = 4_000_000  # bytes of text per domain


def bible():
    out = subprocess.run(["bible", "-f", "gen1:1-rev22:21"], capture_output=True, text=True, check=True).stdout
    chapters, current, key = [], [], None
    for line in out.splitlines():
        m = re.match(r"^(\w+?)(\d+):(\d+) (.*)$", line)
        if not m:
            continue
        k = (m.group(1), m.group(2))
        if k != key and current:
            chapters.append(" ".join(current))
            current = []
        key = k
        current.append(m.group(4))
    if current:
        chapters.append(" ".join(current))
    return chapters


def fortunes():
    docs = []
    for path in sorted(glob.glob("/usr/share/games/fortunes/*")):
        if path.endswith((".dat", ".u8")) or os.path.isdir(path):
            continue
        with open(path, encoding="utf-8", errors="replace") as f:
            docs += [d.strip() for d in f.read().split("\n%\n") if d.strip()]
    return docs


def files(pattern, min_size=200):
    docs = []
    for path in sorted(glob.glob(pattern, recursive=True)):
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except (UnicodeDecodeError, OSError):
            continue
        if len(text) >= min_size:
            docs.append(text)
    return docs


def metamath():
    path = "/usr/share/metamath/databases/set.mm"
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    # Sections start with a $( ### or #*# banner: one document each.
    parts = re.split(r"\n(?=\$\(\n[#*=-]{20,})", text)
    return [p for p in parts if len(p) > 500]


def capped(docs, rng):
    rng.shuffle(docs)
    out, size = [], 0
    for d in docs:
        if size >= CAP:
            break
        out.append(d)
        size += len(d)
    return out


def main():
    target = sys.argv[1]
    rng = random.Random(1234)
    domains = {
        "prose": bible() + fortunes(),
        "reference": files("/usr/share/doc/python3.11/html/_sources/**/*.txt") + files("/usr/share/doc/python3.11/**/*.rst.txt"),
        "code": files("/usr/share/go-1.19/src/**/*.go", 500),
        "math": metamath(),
    }
    records = []
    for name, docs in domains.items():
        kept = capped(docs, rng)
        print(f"  {name:10s} {len(kept):6d} documents {sum(map(len, kept)) / 1e6:6.2f} MB", file=sys.stderr)
        records += [{"domain": name, "text": d} for d in kept]
    if not records:
        sys.exit("no corpus text found: install bible-kjv fortunes python3.11-doc golang-1.19-src metamath-databases")
    rng.shuffle(records)
    os.makedirs(os.path.dirname(target), exist_ok=True)
    tmp = target + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        for r in records:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    os.replace(tmp, target)


if __name__ == "__main__":
    main()
