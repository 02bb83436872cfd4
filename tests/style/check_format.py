#!/usr/bin/env python3
"""Checks that the C++ tree follows .clang-format and stays under 120 columns.

Usage: check_format.py REPO_ROOT

Every tracked *.cpp, *.h, *.cu and *.cuh file must be left unchanged by clang-format-19
(the version setup.sh --tests installs: another version formats differently),
and no line may be longer than 120 columns (clang-format does not break string
literals). Exit 0 when all holds, 1 naming each file and line that does not,
77 (skipped, saying why) without clang-format-19 or outside a git checkout.
"""

import os
import shutil
import subprocess
import sys

FORMATTER = "clang-format-19"
MAX_COLUMNS = 120
SUFFIXES = (".cpp", ".h", ".cu", ".cuh")


def tracked_sources(root):
    listed = subprocess.run(["git", "-C", root, "ls-files", "-z"], capture_output=True, check=True).stdout
    return [p for p in listed.decode().split("\0") if p.endswith(SUFFIXES)]


def main(argv):
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    root = argv[1]
    if shutil.which(FORMATTER) is None:
        print(f"SKIP: no {FORMATTER} (scripts/setup.sh --tests installs it)")
        return 77
    try:
        files = tracked_sources(root)
    except (OSError, subprocess.CalledProcessError):
        print(f"SKIP: {root} is not a git checkout, so the tracked sources are not known")
        return 77
    if not files:
        print(f"no C++ sources tracked under {root}")
        return 1
    problems = []
    for path in files:
        with open(os.path.join(root, path), encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                if len(line.rstrip("\n")) > MAX_COLUMNS:
                    problems.append(f"{path}:{number}: {len(line.rstrip())} columns (at most {MAX_COLUMNS})")
    for start in range(0, len(files), 50):
        batch = files[start:start + 50]
        run = subprocess.run([FORMATTER, "--dry-run", "--Werror", "--style=file"] + batch, cwd=root,
                             capture_output=True, text=True)
        if run.returncode != 0:
            unformatted = sorted({line.split(":")[0] for line in run.stderr.splitlines() if ": error:" in line})
            problems += [f"{p}: not as .clang-format lays it out (run: {FORMATTER} -i {p})" for p in unformatted]
            if not unformatted:
                problems.append(run.stderr.strip() or f"{FORMATTER} failed on {batch[0]}..")
    for p in problems:
        print(p)
    print(f"{len(files)} C++ files checked: {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
