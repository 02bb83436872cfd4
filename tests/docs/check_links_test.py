#!/usr/bin/env python3
"""Tests check_links.py on small made-up repositories: each rule it enforces fails where it is broken and holds
where it is kept (standard library only). Usage: check_links_test.py REPO_ROOT"""

import os
import subprocess
import sys
import tempfile

GOOD_DOC = """# A guide

## `auto`: precision and micro-batch

## The torch 2.11 leg

## Hugging Face's transformers

## Twice

## Twice

```sh
# not a heading
```

[up](#a-guide) [tick](#auto-precision-and-micro-batch) [dots](#the-torch-211-leg)
[apostrophe](#hugging-faces-transformers) [second](#twice-1) [readme](../README.md#the-readme)
"""


def make_repo(root, readme="# The readme\n\n[guide](docs/GUIDE.md#a-guide)\n", docs=None):
    os.makedirs(os.path.join(root, "docs"))
    with open(os.path.join(root, "README.md"), "w", encoding="utf-8") as f:
        f.write(readme)
    for name, text in (docs or {"GUIDE.md": GOOD_DOC}).items():
        with open(os.path.join(root, "docs", name), "w", encoding="utf-8") as f:
            f.write(text)


def check(checker, root):
    result = subprocess.run([sys.executable, checker, root], capture_output=True, text=True)
    return result.returncode, result.stdout


def main(argv):
    checker = os.path.join(argv[1], "tests", "docs", "check_links.py")
    cases = [
        ("every rule kept", {}, 0, ""),
        ("a missing anchor in another file", {"readme": "# R\n\n[x](docs/GUIDE.md#no-such-heading)\n"}, 1,
         "no heading of docs/GUIDE.md has this anchor"),
        ("a missing anchor in the same file", {"docs": {"GUIDE.md": GOOD_DOC + "[x](#twice-2)\n"}}, 1,
         "#twice-2: no heading"),
        ("a heading inside a code block is no anchor", {"docs": {"GUIDE.md": GOOD_DOC + "[x](#not-a-heading)\n"}}, 1,
         "#not-a-heading: no heading"),
        ("a missing file", {"readme": "# R\n\n[x](docs/NONE.md)\n"}, 1, "no such file in the repository"),
        ("a long README", {"readme": "# R\n" + "line\n" * 300}, 1, "README.md: 301 lines, more than 300"),
        ("a long doc", {"docs": {"GUIDE.md": GOOD_DOC + "line\n" * 600}}, 1, "lines, more than 600"),
        ("eleven docs", {"docs": {f"D{i}.md": "# D\n" for i in range(11)} | {"GUIDE.md": GOOD_DOC}}, 1,
         "docs/: 12 files, more than 10"),
    ]
    failures = 0
    for name, repo, want_code, want_text in cases:
        with tempfile.TemporaryDirectory() as root:
            make_repo(root, **repo)
            code, out = check(checker, root)
        if code != want_code or want_text not in out:
            failures += 1
            print(f"FAIL {name}: exit {code} (wanted {want_code}); output:\n{out}")
        else:
            print(f"ok   {name}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
