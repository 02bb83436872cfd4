#!/usr/bin/env python3
"""The TextMate grammar (editors/sink.tmLanguage.json) against the ANTLR
grammar (grammar/Sink.g4): every keyword of the language is highlighted as a
keyword and nothing else is; the comment, string and number rules match what
the lexer lexes. The two cannot drift apart unnoticed."""
import json, os, re, sys

root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
g4 = open(os.path.join(root, "grammar", "Sink.g4")).read()
tm = json.load(open(os.path.join(root, "editors", "sink.tmLanguage.json")))
json.load(open(os.path.join(root, "editors", "language-configuration.json")))

code = re.sub(r"//[^\n]*", "", g4)
keywords = set(re.findall(r"'([a-z]+)'", code))
failures = []
keyword_rule = next(p for p in tm["patterns"] if p.get("name") == "keyword.control.sink")
highlighted = set(re.search(r"\\b\((.*)\)\\b", keyword_rule["match"]).group(1).split("|"))
if highlighted != keywords:
    failures.append("keywords: the grammar has %s, the TextMate grammar %s" % (sorted(keywords), sorted(highlighted)))

number = re.compile(next(p for p in tm["patterns"] if p.get("name") == "constant.numeric.sink")["match"])
for text in ["64", "1_000", "3e-4", "6e-3", "0.5", ".5", "5B", "1.5M", "2K", "10T"]:
    m = number.search(text)
    if not m or m.group(0) != text:
        failures.append("number %r is not highlighted whole" % text)
line_comment = re.compile(tm["repository"]["comments"]["patterns"][0]["match"])
if not line_comment.search("x = 1  // why"):
    failures.append("line comments")
for f in failures:
    print("FAILED", f)
print("ok: %d keywords agree" % len(keywords) if not failures else "")
sys.exit(1 if failures else 0)
