#!/usr/bin/env python3
"""Checks that the repository speaks only of itself (standard library only).

Usage: check_words.py REPO_ROOT

Reads every file git tracks under REPO_ROOT (but .ci/ and this file) as text
and fails on a line that
- numbers the development sessions or the issues the work was tracked in (a
  reader has neither; say what was done or what is open instead),
- speaks of machines lent to the project or the tool that lent them (say what
  a GPU job is given: its time, what it takes and returns),
- points into a shared/ folder beside the checkout (notes a user does not
  have) or, in the pages and specs a user reads, names those notes (bring the
  fact in, with the paper's section or table),
- repeats a claim about the GPU path that stopped being true: that it has
  never run on a GPU, that there are no GPU numbers yet (it ran on an H100:
  docs/MEASUREMENTS.md), or that generated kernels "matched on an H100" (that was a
  forward-only NVPTX port, since removed).

Exit 0 when no line does, 1 with one line per hit (file:line: the phrase, and
why), 77 (a skip) when REPO_ROOT is not a git checkout, 2 on a usage error.
"""

import os
import re
import subprocess
import sys

# (pattern, why). Each is matched case-insensitively against one line at a time; every match is reported.
RULES = [
    (r"\bsessions? #?\s?\d+", "a development session's number"),
    (r"\bissues? #?\s?\d+", "an issue number"),
    (r"\b(a )?lent\b(\s+(gpu|h100))?(\s+machines?)?|\blender\b", "a machine on loan"),
    (r"`?\bdevice`? tool\b", "the tool that lends machines"),
    (r"(?<![\w/.])shared/(design|paper|hooks)\b([\w./-]*[\w/])?|\.\./shared/([\w./-]*[\w/])?",
     "a path into shared/, outside the repository"),
    (r"\b((has|have|had) (not|never) (yet )?(been )?|not (yet )?(been )?|never (yet )?(been )?)run on (a|one|any) "
     r"(gpu|h100)\b( yet)?|\bnot yet run on one\b", "a dead claim: the CUDA path has run on an H100 (docs/MEASUREMENTS.md)"),
    (r"\bno (gpu |h100 )?(numbers|measurements|results) yet\b", "a dead claim: there are H100 numbers (docs/MEASUREMENTS.md)"),
    (r"\bmatch(ed|es)? on an? (h100|a100|gpu)\b", "a dead claim: that was the removed NVPTX port"),
]

# Names of the notes kept beside the checkout, checked in what a user reads; C++ sources' comments
# still cite two of them and are not checked for these yet.
NOTE_NAMES = (r"\b(PAPER-FACTS|SCALE-NOTES)\b|\bDESIGN\.md\b", "a note outside the repository")
CODE_SUFFIXES = (".cpp", ".h", ".hpp", ".cc", ".cuh", ".cu")

SKIPPED_FOLDERS = (".ci/",)


def tracked_files(root):
    """The tracked files, or None when root is not a git checkout (or git is missing)."""
    try:
        out = subprocess.run(["git", "-C", root, "ls-files", "-z"], capture_output=True, check=False)
    except OSError:
        return None
    if out.returncode != 0:
        return None
    return [name for name in out.stdout.decode("utf-8", "replace").split("\0") if name]


def text_lines(path):
    """The file's lines, or None for a binary or unreadable file."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    if b"\0" in data:
        return None
    try:
        return data.decode("utf-8").splitlines()
    except UnicodeDecodeError:
        return None


def hits(root):
    files = tracked_files(root)
    if files is None:
        return None
    here = os.path.realpath(__file__)
    rules = [(re.compile(p, re.IGNORECASE), why) for p, why in RULES]
    notes = re.compile(NOTE_NAMES[0])
    found = []
    for name in files:
        if name.startswith(SKIPPED_FOLDERS):
            continue
        path = os.path.join(root, name)
        if os.path.realpath(path) == here or not os.path.isfile(path):
            continue
        lines = text_lines(path)
        if lines is None:
            continue
        check_notes = not name.endswith(CODE_SUFFIXES)
        for number, line in enumerate(lines, 1):
            for rule, why in rules + ([(notes, NOTE_NAMES[1])] if check_notes else []):
                for m in rule.finditer(line):
                    found.append(f"{name}:{number}: \"{m.group(0)}\": {why}")
    return found


def main(argv):
    if len(argv) != 2:
        print(f"usage: {os.path.basename(argv[0])} REPO_ROOT", file=sys.stderr)
        return 2
    if not os.path.isdir(argv[1]):
        print(f"{argv[1]}: not a folder", file=sys.stderr)
        return 2
    found = hits(argv[1])
    if found is None:
        print(f"{argv[1]}: not a git checkout (or no git): no tracked files to check, skipped")
        return 77
    for line in found:
        print(line)
    if found:
        print(f"{len(found)} phrase(s) that speak of something other than the repository")
        return 1
    print("tracked files: no session or issue numbers, machines on loan, notes from outside, or dead GPU claims")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
