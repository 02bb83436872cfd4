#!/usr/bin/env python3
"""scripts/sink_cost_verdicts.py on tables written here by hand: each verdict follows the numbers (a gap within
noise of zero keeps the loss, one past it does not; kurtosis and W8A8 below or above softmax's; the longer context's
rise), one seed without a bar is said so, and a table without softmax is refused (standard-library Python)."""
import json
import os
import subprocess
import sys
import tempfile

ROOT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
SCRIPT = os.path.join(ROOT, "scripts", "sink_cost_verdicts.py")


def row(run, gap0, gap0_std, kurtosis, w8, longer, valid=2.30, std=0.001):
    r = {"run": run, "seeds": 3, "valid_loss": valid, "valid_loss_std": std, "windowed_gap_0": gap0,
         "windowed_gap_1": 0.0, "windowed_gap_1_std": 0.0005, "kurtosis_max": kurtosis, "kurtosis_max_std": 1.0,
         "quantized_gap_w8a8": w8, "quantized_gap_w8a8_std": 0.0005, "longer_loss_4": longer,
         "longer_loss_4_std": 0.01}
    if gap0_std is not None:
        r["windowed_gap_0_std"] = gap0_std
    return r


def run(table, *extra):
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(table, f)
    try:
        return subprocess.run([sys.executable, SCRIPT, f.name, *extra], capture_output=True, text=True)
    finally:
        os.unlink(f.name)


def line_of(text, name):
    return next(line for line in text.splitlines() if line.startswith(f"- {name}:"))


def main():
    table = {"rows": [row("costs_softmax", 0.010, 0.001, 3.0, 0.002, 2.50),
                      row("free", 0.0002, 0.0004, 40.0, 0.0001, 5.00),
                      row("leaky", 0.008, 0.001, 0.5, 0.0021, 2.51)]}
    done = run(table)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    window = out.split("**Outliers")[0]
    assert "keeps its loss under the window" in line_of(window, "free"), out
    assert "loses under the window too" in line_of(window, "leaky"), out
    outliers = out.split("**Outliers")[1].split("**4x")[0]
    assert "kurtosis 40.00 ± 1.00 (above softmax's)" in line_of(outliers, "free"), out
    assert "(below softmax's)" in line_of(outliers, "free").split("W8A8")[1], out
    assert "kurtosis 0.50 ± 1.00 (below softmax's)" in line_of(outliers, "leaky"), out
    assert "within noise of softmax's" in line_of(outliers, "leaky").split("W8A8")[1], out
    longer = out.split("**4x")[1]
    assert "holds it worse than softmax" in line_of(longer, "free"), out
    assert "holds it as softmax does" in line_of(longer, "leaky"), out
    assert "no bar" not in out, out

    # One seed: no standard deviation, and the window's verdict compares with softmax's gap instead.
    single = {"rows": [{k: v for k, v in r.items() if not k.endswith("_std")} for r in table["rows"]]}
    out = run(single).stdout
    assert "one completed seed" in out, out
    assert "keeps its loss under the window" in line_of(out.split("**Outliers")[0], "free"), out

    missing = run(table, "no_such_run")
    assert missing.returncode != 0 and "no run 'no_such_run'" in (missing.stderr + missing.stdout), missing
    print("sink_cost_verdicts: verdicts follow the numbers")


if __name__ == "__main__":
    main()
