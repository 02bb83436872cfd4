#!/usr/bin/env python3
"""ctest `table_formats`: `sinkc table` and `sinkc diff` in every --format on
the synthetic runs of results_fixture, each read back by an independent
parser (Python's csv and json modules, and by hand for markdown and LaTeX)
and compared with what the runs' own files say: the expected numbers are
computed here from metrics.jsonl, summary.json and plan.toml, not by sinkc.

    check_table_formats.py SINKC RESULTS_FIXTURE WORK_DIR
    check_table_formats.py --pandas PYTHON SINKC RESULTS_FIXTURE WORK_DIR

The second form (ctest `table_formats_pandas`) loads the CSV with pandas in
PYTHON (SINKLAB_PYTHON, or python3), as the results page tells users to, and
skips (77) where pandas is not installed.
"""
import csv
import io
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tomllib


class Bad(Exception):
    pass


def runs_on_disk(folder):
    """Every run directory: its name, seed base, status and last metrics line."""
    out = []
    for leaf in sorted(os.listdir(folder)):
        d = os.path.join(folder, leaf)
        if not os.path.isfile(os.path.join(d, "plan.toml")):
            continue
        with open(os.path.join(d, "plan.toml"), "rb") as f:
            plan = tomllib.load(f)
        name = plan["name"]
        status = "running"
        if os.path.exists(os.path.join(d, "summary.json")):
            with open(os.path.join(d, "summary.json")) as f:
                status = json.load(f)["status"]
        with open(os.path.join(d, "metrics.jsonl")) as f:
            lines = [json.loads(line) for line in f if line.strip()]
        last = lines[-1] if lines else None
        out.append({"dir": d, "name": name, "base": re.sub(r"\.seed=\d+$", "", name), "status": status,
                    "last": last, "proxy": from_proxy(plan, last)})
    return out


def from_proxy(plan, last):
    """The runtime's word in metrics.jsonl; for runs recorded before it said, the paper's rule: attention that
    is not normalized to sum to at most 1 (normalize none, abs_clamped, pnorm, count) or differential."""
    if last is not None and "sink_from_proxy" in last:
        return last["sink_from_proxy"]
    attention = plan["attention"]
    return attention["normalize"] not in ("sum", "softpick") or attention["differential"]


def metric(line, key):
    """A metric id's value in one metrics.jsonl line, or None."""
    if line is None:
        return None
    if key.startswith("sink_") and key[5:].isdigit():
        return line.get("sink", {}).get(key[5:])
    if key == "sink_star":
        return line.get("sink_star")
    if key in ("valid_loss", "train_loss"):
        return line.get(key)
    if key == "massive_max":
        return max(line["massive"]) if line.get("massive") else None
    if key == "alpha_1":
        heads = [a for layer in line.get("alpha", []) for a in layer]
        return sum(heads) / len(heads) if heads else None
    raise Bad(f"no oracle for {key}")


METRICS = ["sink_1", "sink_star", "alpha_1", "valid_loss", "train_loss", "massive_max"]


def expected_rows(runs):
    """Per seed base: mean and sample std of each metric over the completed seeds, or, with none completed,
    the latest values of those still going, stopped or failed; diverged seeds never count."""
    groups = {}
    for r in runs:
        groups.setdefault(r["base"], []).append(r)
    out = {}
    for base, members in groups.items():
        use = [r for r in members if r["status"] == "completed"]
        if not use:
            use = [r for r in members if r["status"] in ("running", "stopped", "failed", "interrupted") and r["last"]]
        row = {"seeds": len(members), "sink_from_proxy": any(r["proxy"] for r in members)}
        for m in METRICS:
            values = [v for v in (metric(r["last"], m) for r in use) if v is not None]
            row[m] = statistics.fmean(values) if values else None
            row[m + "_std"] = statistics.stdev(values) if len(values) > 1 else None
        out[base] = row
    return out


def close(a, b):
    return math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-12)


def run_sinkc(args):
    p = subprocess.run(args, capture_output=True)
    if p.returncode != 0:
        raise Bad(f"{' '.join(args[1:])} exited {p.returncode}: {p.stderr.decode()}")
    return p.stdout


PLAIN_NUMBER = re.compile(r"^-?\d+(\.\d+)?(e[+-]?\d+)?$")


def check_csv(raw, expected):
    text = raw.decode("utf-8")
    if not text.endswith("\r\n") or "\n" in text.replace("\r\n", ""):
        raise Bad("CSV lines must end with CRLF (RFC 4180)")
    rows = list(csv.DictReader(io.StringIO(text, newline="")))
    if {r["run"] for r in rows} != set(expected):
        raise Bad(f"CSV runs {sorted(r['run'] for r in rows)} != {sorted(expected)}")
    for r in rows:
        if None in r or None in r.values():
            raise Bad(f"CSV row of {r['run']} has a field count other than the header's")
        want = expected[r["run"]]
        if int(r["seeds"]) != want["seeds"]:
            raise Bad(f"{r['run']}: seeds {r['seeds']} != {want['seeds']}")
        if r["sink_from_proxy"] != ("true" if want["sink_from_proxy"] else "false"):
            raise Bad(f"{r['run']}: sink_from_proxy '{r['sink_from_proxy']}', the runs say {want['sink_from_proxy']}")
        for key in [m for m in METRICS if m in r] + [m + "_std" for m in METRICS if m + "_std" in r]:
            field, value = r[key], want[key]
            if value is None:
                if field != "":
                    raise Bad(f"{r['run']} {key}: '{field}' where the runs have no value")
                continue
            if not PLAIN_NUMBER.match(field):
                raise Bad(f"{r['run']} {key}: '{field}' is not a plain number")
            if not close(float(field), value):
                raise Bad(f"{r['run']} {key}: {field} != {value} (metrics.jsonl)")
    for key in ("sink_1", "valid_loss", "alpha_1", "sink_star"):
        if key not in rows[0]:
            raise Bad(f"CSV has no column {key}")
    return len(rows)


def check_json(raw, expected):
    doc = json.loads(raw)
    keys = [c["key"] for c in doc["columns"]]
    rows = doc["rows"]
    if {r["run"] for r in rows} != set(expected):
        raise Bad("JSON runs differ from the run directories'")
    for r in rows:
        if list(r) != keys:
            raise Bad(f"JSON row of {r['run']} has keys {list(r)}, the columns are {keys}")
        want = expected[r["run"]]
        if r["seeds"] != want["seeds"] or not isinstance(r["seeds"], int):
            raise Bad(f"{r['run']}: seeds {r['seeds']!r}")
        if r["sink_from_proxy"] is not want["sink_from_proxy"]:
            raise Bad(f"{r['run']}: sink_from_proxy {r['sink_from_proxy']!r}")
        for key in [k for k in keys if k in want and k != "sink_from_proxy"]:
            value, got = want[key], r[key]
            if value is None:
                if got is not None:
                    raise Bad(f"{r['run']} {key}: {got!r} where the runs have no value (null expected)")
            elif not isinstance(got, (int, float)) or isinstance(got, bool) or not close(got, value):
                raise Bad(f"{r['run']} {key}: {got!r} != {value}")
    units = {c["key"]: c["unit"] for c in doc["columns"]}
    if units.get("sink_1") != "%" or units.get("valid_loss") != "nats/token":
        raise Bad(f"JSON columns' units: {units}")


def unescaped(text, char):
    return len(re.findall(r"(?<!\\)" + re.escape(char), text))


def check_markdown(raw, rows):
    lines = raw.decode().rstrip("\n").split("\n")
    table = [line for line in lines if line.startswith("|")]
    if len(table) != rows + 2:
        raise Bad(f"markdown: {len(table)} table lines for {rows} rows")
    bars = {unescaped(line, "|") for line in table}
    if len(bars) != 1:
        raise Bad(f"markdown rows with different column counts: {bars}")
    if set(table[1]) - set("|-: "):
        raise Bad("markdown: the second line is not the separator")


def check_latex(raw, rows, escaped_name=None):
    lines = raw.decode().rstrip("\n").split("\n")
    m = re.fullmatch(r"\\begin\{tabular\}\{([lr]+)\}", lines[0])
    if not m or lines[1] != r"\toprule" or lines[3] != r"\midrule" or lines[-1] != r"\end{tabular}":
        raise Bad("LaTeX: not a booktabs tabular:\n" + "\n".join(lines[:4]))
    columns = len(m.group(1))
    body = lines[2:3] + lines[4:4 + rows]
    if lines[4 + rows] != r"\bottomrule":
        raise Bad(f"LaTeX: no \\bottomrule after {rows} rows")
    for line in body:
        if not line.endswith(r" \\") or unescaped(line, "&") != columns - 1:
            raise Bad(f"LaTeX row without {columns} cells: {line}")
        for char in "_%#${}":
            # Braces only as the escapes' own ({} after \textbar and the like).
            stripped = re.sub(r"\\text[a-z]+\{\}", "", line)
            if unescaped(stripped, char) and char not in "$":
                raise Bad(f"LaTeX: unescaped '{char}' in {line}")
        if unescaped(line.replace("$\\pm$", "").replace("$\\times$", ""), "$"):
            raise Bad(f"LaTeX: unescaped '$' in {line}")
    if escaped_name and escaped_name not in "\n".join(body):
        raise Bad(f"LaTeX: no {escaped_name}: names with _ not escaped")


def check_asterisks(fmt, raw, expected, footnote):
    """The reader formats mark a proxy row's Sink values with an asterisk after the number and say why below; no
    other row has one."""
    text = raw.decode()
    for run, want in expected.items():
        shown = run.replace("_", "\\_") if fmt == "latex" else run
        starts = re.compile(r"[|\s]*" + re.escape(shown) + r"[\s|&]")
        line = next((line for line in text.split("\n") if starts.match(line)), None)
        if line is None:
            raise Bad(f"{fmt}: no row for {run}")
        if bool(re.search(r"\d\\?\*", line)) != want["sink_from_proxy"]:  # markdown escapes it: 18.50\*
            raise Bad(f"{fmt}: {run}'s row {'lacks' if want['sink_from_proxy'] else 'has'} an asterisk: {line}")
    if footnote not in text:
        raise Bad(f"{fmt}: no footnote '{footnote}'")


def check_diff(sinkc, runs, expected):
    by_name = {r["name"]: r["dir"] for r in runs}
    a = by_name["weight_decay.weight_decay=0.0.seed=0"]
    b = by_name["weight_decay.weight_decay=1.0.seed=0"]
    ea, eb = expected["weight_decay.weight_decay=0.0"], expected["weight_decay.weight_decay=1.0"]
    raw = run_sinkc([sinkc, "diff", a, b, "--format", "csv"])
    rows = {r["metric"]: r for r in csv.DictReader(io.StringIO(raw.decode(), newline=""))}
    for key in ("sink_1", "valid_loss", "alpha_1"):
        r = rows[key]
        for side, e in (("a", ea), ("b", eb)):
            if not close(float(r[side]), e[key]) or not close(float(r[side + "_std"]), e[key + "_std"]):
                raise Bad(f"diff CSV {key} {side}: {r[side]} ± {r[side + '_std']} != {e[key]} ± {e[key + '_std']}")
            if r[side + "_n"] != "2":
                raise Bad(f"diff CSV {key} {side}_n: {r[side + '_n']}")
        if not close(float(r["delta"]), eb[key] - ea[key]):
            raise Bad(f"diff CSV {key} delta {r['delta']} != {eb[key] - ea[key]}")
        if r["beyond_noise"] not in ("true", "false"):
            raise Bad(f"diff CSV {key} beyond_noise: '{r['beyond_noise']}'")
    if rows["sink_1"]["beyond_noise"] != "true":  # 40 points apart, seeds 2.1 apart
        raise Bad("diff CSV: Sink_1's move is beyond noise")
    doc = json.loads(run_sinkc([sinkc, "diff", a, b, "--format", "json"]))
    moved = {m["id"]: m for m in doc["metrics"]}
    if not close(moved["sink_1"]["delta"], eb["sink_1"] - ea["sink_1"]):
        raise Bad("diff JSON: Sink_1's delta")
    latex = run_sinkc([sinkc, "diff", a, b, "--format", "latex"])
    check_latex(latex, len(rows))
    # Against the unnormalized run: B's Sink_1 and alpha_1 are proxy values, its loss is not, A's nothing is.
    proxy = next(r for r in runs if r["proxy"])
    raw = run_sinkc([sinkc, "diff", by_name["k_bias"], proxy["dir"], "--format", "csv"])
    flags = {r["metric"]: (r["a_from_proxy"], r["b_from_proxy"]) for r in csv.DictReader(io.StringIO(raw.decode()))}
    if flags["sink_1"] != ("false", "true") or flags["alpha_1"] != ("false", "true"):
        raise Bad(f"diff CSV proxy flags: {flags}")
    if flags["valid_loss"] != ("false", "false"):
        raise Bad(f"diff CSV: a loss is never a proxy value: {flags['valid_loss']}")
    text = run_sinkc([sinkc, "diff", by_name["k_bias"], proxy["dir"]]).decode()
    if not re.search(r"^Sink_1 \(%\) .*\d\*", text, re.M) or "(the paper's asterisk)" not in text:
        raise Bad("diff text: no asterisk on the proxy run's Sink_1, or no footnote:\n" + text)


def has_pandas(python):
    try:
        return subprocess.run([python, "-c", "import pandas"], capture_output=True).returncode == 0
    except OSError:  # no such interpreter (a stale SINKLAB_PYTHON)
        return False


def pandas_check(pythons, csv_path, expected):
    python = next((p for p in pythons if has_pandas(p)), None)
    if python is None:
        print(f"SKIP: pandas is not importable in {' or '.join(pythons)} (SINKLAB_PYTHON: a Python with pandas)")
        return 77
    # The one-liner of docs/RESULTS.md, then the column types a user relies on.
    code = (
        "import json, sys, pandas as pd\n"
        "t = pd.read_csv(sys.argv[1])\n"
        "print(json.dumps({'dtypes': {c: str(t[c].dtype) for c in t.columns},"
        " 'sink_1': dict(zip(t['run'], [None if v != v else v for v in t['sink_1']]))}))\n")
    p = subprocess.run([python, "-c", code, csv_path], capture_output=True, text=True)
    if p.returncode != 0:
        raise Bad(f"pandas could not read the CSV: {p.stderr}")
    got = json.loads(p.stdout)
    for key in ("sink_1", "sink_1_std", "valid_loss", "alpha_1", "sink_star"):
        if got["dtypes"].get(key) != "float64":
            raise Bad(f"pandas reads {key} as {got['dtypes'].get(key)}, not float64")
    if got["dtypes"].get("sink_from_proxy") != "bool":
        raise Bad(f"pandas reads sink_from_proxy as {got['dtypes'].get('sink_from_proxy')}, not bool")
    for run, value in got["sink_1"].items():
        want = expected[run]["sink_1"]
        if (value is None) != (want is None) or (want is not None and not close(value, want)):
            raise Bad(f"pandas: {run} sink_1 {value} != {want}")
    print(f"ok: pandas ({python}) reads {len(got['sink_1'])} rows, metric columns as float64")
    return 0


def main():
    args = sys.argv[1:]
    pythons = None
    if args[0] == "--pandas":
        pythons, args = [p for p in (args[1], "python3") if p], args[2:]
    sinkc, fixture, work = args[:3]
    shutil.rmtree(work, ignore_errors=True)
    folder = os.path.join(work, "runs")
    os.makedirs(folder)
    subprocess.run([fixture, folder], check=True)
    runs = runs_on_disk(folder)
    expected = expected_rows(runs)
    if len(expected) < 5:
        raise Bad(f"only {len(expected)} runs: the fixture changed?")
    table = [sinkc, "table", folder, "--format"]
    csv_raw = run_sinkc(table + ["csv"])
    if pythons:
        path = os.path.join(work, "t.csv")
        with open(path, "wb") as f:
            f.write(csv_raw)
        return pandas_check(pythons, path, expected)
    rows = check_csv(csv_raw, expected)
    check_json(run_sinkc(table + ["json"]), expected)
    check_markdown(run_sinkc(table + ["markdown"]), rows)
    check_latex(run_sinkc(table + ["latex"]), rows, r"optim.weight\_decay")
    text = run_sinkc(table + ["text"]).decode()
    if text != run_sinkc(table[:-1]).decode():
        raise Bad("--format text is not the default output")
    if not any(want["sink_from_proxy"] for want in expected.values()):
        raise Bad("no run of the fixture has proxy Sink values")
    note = "* proxy scores for unnormalized attention (the paper's asterisk)"
    check_asterisks("text", text.encode(), expected, "\n" + note + "\n")
    check_asterisks("markdown", run_sinkc(table + ["markdown"]), expected, "\n\\" + note + "\n")
    check_asterisks("latex", run_sinkc(table + ["latex"]), expected, "{\\footnotesize " + note + "}")
    check_diff(sinkc, runs, expected)
    # The oracle must be able to fail: one number moved by 0.1 is caught.
    if b",71.5," not in csv_raw:
        raise Bad("Sink_1 of weight_decay=0.0 is not 71.5: the fixture changed?")
    moved = csv_raw.replace(b",71.5,", b",71.6,", 1)
    try:
        check_csv(moved, expected)
        raise Bad("a changed number went unnoticed")
    except Bad as e:
        if "unnoticed" in str(e):
            raise
    print(f"ok: {rows} rows in CSV, JSON, markdown, LaTeX and text; diff in CSV, JSON and LaTeX")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Bad as e:
        print(f"FAIL: {e}")
        sys.exit(1)
