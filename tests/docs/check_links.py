#!/usr/bin/env python3
"""Checks the links of README.md and docs/*.md (standard library only).

Usage: check_links.py REPO_ROOT

Every markdown link [text](target) whose target is not an http(s) or mailto
URL must name a file or folder that exists, relative to the folder of the
markdown file, inside the repository; where it names a markdown file (or is a
pure #anchor), the anchor after '#' must be one of that file's headings, as
GitHub spells them. README.md must have at most 300 lines, each file of docs/
at most 600, and docs/ at most 10 files: the docs are guides (running, GPUs,
the language, results, ...), and evidence goes into their one measurements page. Exit 0 when all holds, 1 with one line
per problem (file:line: what) otherwise, 2 on a usage error.
"""

import os
import re
import sys

README_MAX_LINES = 300
DOC_MAX_LINES = 600
DOCS_MAX_FILES = 10

# [text](target) or [text](target "title"); text may hold one level of
# brackets, e.g. [`a[0]`](x). Images ![alt](src) match too, which is wanted.
LINK = re.compile(r"\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
FENCE = re.compile(r"^\s*(```|~~~)")
CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1")
EXTERNAL = re.compile(r"^(https?:|mailto:)", re.IGNORECASE)


def heading_anchor(heading):
    """GitHub's anchor for a heading's text: lowercase, code spans and links read as their text, every character
    but letters, digits, '_', '-' and spaces dropped, spaces made hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip())
    text = text.replace("`", "").lower()
    text = "".join(c for c in text if c.isalnum() or c in "_- ")
    return text.replace(" ", "-")


def anchors(path):
    """Every anchor the headings of a markdown file define (a repeated heading gets -1, -2, ... as on GitHub)."""
    seen, found = {}, set()
    in_fence = False
    with open(path, encoding="utf-8") as f:
        for line in f:
            if FENCE.match(line):
                in_fence = not in_fence
                continue
            match = None if in_fence else re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
            if not match:
                continue
            anchor = heading_anchor(match.group(1))
            count = seen.get(anchor, 0)
            seen[anchor] = count + 1
            found.add(anchor if count == 0 else f"{anchor}-{count}")
    return found


def markdown_files(root):
    files = [os.path.join(root, "README.md")]
    docs = os.path.join(root, "docs")
    if os.path.isdir(docs):
        files += sorted(os.path.join(docs, name) for name in os.listdir(docs) if name.endswith(".md"))
    return [f for f in files if os.path.isfile(f)]


def links(path):
    """(line number, target) of every link outside fenced code blocks and code spans."""
    in_fence = False
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if FENCE.match(line):
                in_fence = not in_fence
                continue
            if in_fence:
                continue
            for match in LINK.finditer(CODE_SPAN.sub("", line)):
                yield number, match.group(1)


def problems(root):
    root = os.path.realpath(root)
    found = []
    known_anchors = {}

    def check_anchor(shown, number, target, markdown):
        anchor = target.split("#", 1)[1] if "#" in target else ""
        if not anchor or not markdown.endswith(".md") or not os.path.isfile(markdown):
            return
        if markdown not in known_anchors:
            known_anchors[markdown] = anchors(markdown)
        if anchor not in known_anchors[markdown]:
            found.append(f"{shown}:{number}: {target}: no heading of {os.path.relpath(markdown, root)} has this anchor")

    for path in markdown_files(root):
        shown = os.path.relpath(path, root)
        for number, target in links(path):
            if not target or EXTERNAL.match(target):
                continue
            if target.startswith("#"):
                check_anchor(shown, number, target, path)
                continue
            if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE):
                found.append(f"{shown}:{number}: {target}: a URL other than http(s) or mailto")
                continue
            file_part = target.split("#", 1)[0].split("?", 1)[0]
            if os.path.isabs(file_part):
                found.append(f"{shown}:{number}: {target}: an absolute path")
                continue
            resolved = os.path.realpath(os.path.join(os.path.dirname(path), file_part))
            if os.path.commonpath([root, resolved]) != root:
                found.append(f"{shown}:{number}: {target}: resolves outside the repository ({resolved})")
            elif not os.path.exists(resolved):
                found.append(f"{shown}:{number}: {target}: no such file in the repository")
            else:
                check_anchor(shown, number, target, resolved)
    readme = os.path.join(root, "README.md")
    if not os.path.isfile(readme):
        found.append("README.md: missing")
    else:
        with open(readme, encoding="utf-8") as f:
            count = sum(1 for _ in f)
        if count > README_MAX_LINES:
            found.append(f"README.md: {count} lines, more than {README_MAX_LINES}")
    docs = [p for p in markdown_files(root) if os.path.dirname(p) == os.path.join(root, "docs")]
    for path in docs:
        with open(path, encoding="utf-8") as f:
            count = sum(1 for _ in f)
        if count > DOC_MAX_LINES:
            found.append(f"{os.path.relpath(path, root)}: {count} lines, more than {DOC_MAX_LINES}")
    if len(docs) > DOCS_MAX_FILES:
        found.append(f"docs/: {len(docs)} files, more than {DOCS_MAX_FILES}")
    return found


def main(argv):
    if len(argv) != 2:
        print(f"usage: {os.path.basename(argv[0])} REPO_ROOT", file=sys.stderr)
        return 2
    if not os.path.isdir(argv[1]):
        print(f"{argv[1]}: not a folder", file=sys.stderr)
        return 2
    found = problems(argv[1])
    for line in found:
        print(line)
    if found:
        print(f"{len(found)} problem(s) in README.md and docs/*.md")
        return 1
    print("README.md and docs/*.md: every relative link and anchor resolves inside the repository, and the docs keep "
          "to their sizes")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
