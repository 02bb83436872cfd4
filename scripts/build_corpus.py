#!/usr/bin/env python3
"""Assembles the builtin corpora from Debian-packaged text.

    build_corpus.py TARGET            builtin("default"): ~16 MB, for CPU runs
    build_corpus.py --large TARGET    builtin("large"): ~250 MB, for GPU runs

Four domains, documents kept as documents (one JSON object per line, with a
`text` and a `domain` field): prose, reference, code, math. Each domain is
capped so that no one dominates; the order is shuffled with a fixed seed so
every machine with the same packages builds the same file.

default: KJV Bible chapters and fortunes; the Python documentation sources;
the Go standard library; Metamath's set.mm.
large (scripts/setup.sh --large-corpus installs its packages): the same,
plus the GNU Collaborative International Dictionary of English, FOLDOC, the
Jargon File, WordNet's glosses and Perl's manual pages (prose); the Linux
kernel's Documentation/ and the GNU info manuals (reference); the Linux
kernel's C sources (code). The paper's Figure 5: with too few distinct
tokens no sink forms, so a GPU run of hundreds of millions of tokens needs
the larger one.
"""
import glob
import gzip
import json
import os
import random
import re
import subprocess
import sys
import tarfile

CAP = {"default": 4_000_000, "large": 64_000_000}  # bytes of text per domain


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


def paragraphs(text, size=4000):
    """Splits a long text into documents of about `size` characters at blank lines."""
    docs, current, length = [], [], 0
    for para in text.split("\n\n"):
        current.append(para)
        length += len(para) + 2
        if length >= size:
            docs.append("\n\n".join(current).strip())
            current, length = [], 0
    if current:
        docs.append("\n\n".join(current).strip())
    return [d for d in docs if len(d) >= 200]


def dictionaries():
    """GCIDE (Webster 1913 and WordNet), FOLDOC and the Jargon File, from dictd's files."""
    docs = []
    for name in ("gcide", "foldoc", "jargon"):
        path = f"/usr/share/dictd/{name}.dict.dz"  # dictzip: gzip with an index
        if os.path.exists(path):
            with gzip.open(path, "rt", encoding="utf-8", errors="replace") as f:
                docs += paragraphs(f.read())
    return docs


def wordnet_glosses():
    glosses = []
    for path in sorted(glob.glob("/usr/share/wordnet/data.*")):
        with open(path, encoding="utf-8", errors="replace") as f:
            glosses += [line.split(" | ", 1)[1].strip() for line in f if " | " in line and not line.startswith("  ")]
    return paragraphs("\n\n".join(glosses))


def info_manuals():
    """GNU info manuals, one document per node (nodes start with a 0x1f byte)."""
    docs = []
    for path in sorted(glob.glob("/usr/share/info/**/*.info*.gz", recursive=True)):
        with gzip.open(path, "rt", encoding="utf-8", errors="replace") as f:
            docs += [n.strip() for n in f.read().split("\x1f") if len(n.strip()) >= 500 and "Tag Table:" not in n[:40]]
    return docs


def linux_source():
    """The kernel's Documentation/ (reference) and its C sources (code), read from Debian's tarball."""
    docs = {"reference": [], "code": []}
    tarballs = sorted(glob.glob("/usr/src/linux-source-*.tar.xz"))
    if not tarballs:
        return docs
    with tarfile.open(tarballs[-1], "r:xz") as tar:
        for member in tar:  # a stream: members in archive order, read once
            if not member.isfile() or member.size < 500:
                continue
            path = member.name.split("/", 1)[-1]
            if path.startswith("Documentation/") and path.endswith((".rst", ".txt")):
                domain = "reference"
            elif path.endswith((".c", ".h")) and not path.startswith(("Documentation/", "tools/testing/")):
                domain = "code"
            else:
                continue
            try:
                docs[domain].append(tar.extractfile(member).read().decode("utf-8"))
            except UnicodeDecodeError:
                continue
    return docs


def capped(docs, rng, cap):
    rng.shuffle(docs)
    out, size = [], 0
    for d in docs:
        if size >= cap:
            break
        out.append(d)
        size += len(d)
    return out


def domains(kind):
    python_docs = files("/usr/share/doc/python3.11/html/_sources/**/*.txt") + files("/usr/share/doc/python3.11/**/*.rst.txt")
    go = files("/usr/share/go-1.19/src/**/*.go", 500)
    if kind == "default":
        return {"prose": bible() + fortunes(), "reference": python_docs, "code": go, "math": metamath()}
    linux = linux_source()
    return {
        "prose": bible() + fortunes() + dictionaries() + wordnet_glosses() + files("/usr/share/perl/*/pod/*.pod"),
        "reference": python_docs + linux["reference"] + info_manuals(),
        "code": go + linux["code"],
        "math": metamath(),
    }


def main():
    args = sys.argv[1:]
    kind = "large" if args[:1] == ["--large"] else "default"
    if kind == "large":
        args = args[1:]
    if len(args) != 1:
        sys.exit("usage: build_corpus.py [--large] TARGET.jsonl")
    target = args[0]
    rng = random.Random(1234)
    records = []
    for name, docs in domains(kind).items():
        kept = capped(docs, rng, CAP[kind])
        print(f"  {name:10s} {len(kept):7d} documents {sum(map(len, kept)) / 1e6:7.2f} MB", file=sys.stderr)
        records += [{"domain": name, "text": d} for d in kept]
    if not records:
        sys.exit("no corpus text found: install bible-kjv fortunes python3.11-doc golang-1.19-src metamath-databases")
    if kind == "large" and sum(len(r["text"]) for r in records) < 100_000_000:
        sys.exit("the large corpus needs its packages (scripts/setup.sh --large-corpus installs them): "
                 "linux-source-6.1 dict-gcide dict-foldoc dict-jargon wordnet-base perl-doc")
    rng.shuffle(records)
    os.makedirs(os.path.dirname(target) or ".", exist_ok=True)
    tmp = target + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        for r in records:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    os.replace(tmp, target)


if __name__ == "__main__":
    main()
