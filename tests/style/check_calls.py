#!/usr/bin/env python3
"""Checks that no tracked C++ source calls a function sinklab must not call.

Usage: check_calls.py REPO_ROOT

std::filesystem::remove_all: pip's libtorch.so exports its own copy of it, which calls
recursive_directory_iterator::__erase through a weak reference that newer libstdc++ (Ubuntu 24.04's)
does not export, so in a program linked against that LibTorch the call jumps to address 0. Every
program removes folders with sink::remove_tree (support/remove_tree.h) instead.

Exit 0 when no source calls one, 1 naming each file and line that does, 77 (skipped, saying why)
outside a git checkout.
"""

import os
import re
import subprocess
import sys

SUFFIXES = (".cpp", ".h", ".cu", ".cuh")
FORBIDDEN = {
    re.compile(r"\bremove_all\s*\("): "std::filesystem::remove_all: use sink::remove_tree (support/remove_tree.h)",
}
ALLOWED = {"support/remove_tree.h", "support/remove_tree.cpp"}  # where the reason is written down


def main(argv):
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    root = argv[1]
    try:
        listed = subprocess.run(["git", "-C", root, "ls-files", "-z"], capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        print(f"SKIP: {root} is not a git checkout, so the tracked sources are not known")
        return 77
    files = [p for p in listed.decode().split("\0") if p.endswith(SUFFIXES) and p not in ALLOWED]
    problems = []
    for path in files:
        with open(os.path.join(root, path), encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                code = line.split("//")[0]
                problems += [f"{path}:{number}: {why}" for pattern, why in FORBIDDEN.items() if pattern.search(code)]
    for p in problems:
        print(p)
    print(f"{len(files)} C++ files checked: {len(problems)} forbidden call(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
