#!/usr/bin/env python3
"""What a sink costs, in words computed from the numbers: reads `sinkc table --format json` of specs/sink_costs.sink
(each metric as mean and standard deviation over seeds) and answers the practitioners' three questions for every
design against softmax, as markdown:
  window    does the design keep its loss under a window without kept tokens (windowed_gap_0), where softmax
            does not?
  outliers  is its largest residual-stream kurtosis (kurtosis_max) lower than softmax's, and does it lose less under
            W8A8 (quantized_gap_w8a8)?
  longer    does it hold its loss at 4x the context (longer_loss_4 - valid_loss) better than softmax?
Two values differ when their noise bars (mean ± one standard deviation over seeds) are apart (a value of one seed
has no bar). A design keeps its loss under the window when its gap is within noise of zero, or, without a bar, under
a tenth of softmax's.

usage: sink_cost_verdicts.py TABLE_JSON [SOFTMAX_RUN]   (SOFTMAX_RUN defaults to costs_softmax)
Exit 0 with the verdicts, 2 on bad input.
"""
import json
import sys


def value(row, key):
    """(mean, std) of a metric, std 0 with one seed; None where the run has no number."""
    mean = row.get(key)
    if not isinstance(mean, (int, float)):
        return None
    std = row.get(key + "_std")
    return float(mean), float(std) if isinstance(std, (int, float)) else 0.0


def compare(a, b):
    """'below', 'above' or 'within noise of': a's bar against b's."""
    if a[0] + a[1] < b[0] - b[1]:
        return "below"
    if a[0] - a[1] > b[0] + b[1]:
        return "above"
    return "within noise of"


def show(v, decimals=4):
    return f"{v[0]:.{decimals}f}" + (f" ± {v[1]:.{decimals}f}" if v[1] > 0 else "")


def longer_gap(row):
    """The loss at 4x the context over the trained length's, its noise the two bars' sum."""
    longer, valid = value(row, "longer_loss_4"), value(row, "valid_loss")
    if longer is None or valid is None:
        return None
    return longer[0] - valid[0], longer[1] + valid[1]


def verdicts(table, softmax_name):
    rows = {row.get("run"): row for row in table.get("rows", [])}
    if softmax_name not in rows:
        raise SystemExit(f"sink_cost_verdicts: no run {softmax_name!r} in the table (runs: {', '.join(map(str, rows))})")
    soft = rows[softmax_name]
    # A mean without a standard deviation is one seed's value (or every seed's alike).
    single = any(isinstance(row.get("valid_loss"), (int, float)) and row.get("valid_loss_std") is None
                 for row in rows.values())
    lines = [f"Noise bars are mean ± one standard deviation over seeds"
             + ("; some runs have one completed seed, so their values have no bar" if single else "") + "."]

    soft_window = value(soft, "windowed_gap_0")
    if soft_window is None:
        raise SystemExit(f"sink_cost_verdicts: {softmax_name} has no windowed_gap_0 (did it finish?)")
    zero = (0.0, 0.0)
    lines.append("")
    lines.append(f"**Window without kept tokens.** softmax loses {show(soft_window)} nats ({compare(soft_window, zero)}"
                 f" zero); keeping its first token: {show(value(soft, 'windowed_gap_1') or zero)}.")
    for name, row in rows.items():
        if name == softmax_name or value(row, "windowed_gap_0") is None:
            continue
        gap = value(row, "windowed_gap_0")
        keeps = compare(gap, zero) != "above" if gap[1] > 0 else gap[0] < 0.1 * soft_window[0]
        lines.append(f"- {name}: {show(gap)} nats, {compare(gap, soft_window)} softmax's; "
                     + ("keeps its loss under the window" if keeps else "loses under the window too"))

    lines.append("")
    soft_kurtosis, soft_w8 = value(soft, "kurtosis_max"), value(soft, "quantized_gap_w8a8")
    lines.append(f"**Outliers and W8A8.** softmax: kurtosis {show(soft_kurtosis, 2)}, W8A8 gap {show(soft_w8)} nats.")
    for name, row in rows.items():
        kurtosis, w8 = value(row, "kurtosis_max"), value(row, "quantized_gap_w8a8")
        if name == softmax_name or kurtosis is None or w8 is None:
            continue
        lines.append(f"- {name}: kurtosis {show(kurtosis, 2)} ({compare(kurtosis, soft_kurtosis)} softmax's), "
                     f"W8A8 gap {show(w8)} nats ({compare(w8, soft_w8)} softmax's)")

    lines.append("")
    soft_longer = longer_gap(soft)
    if soft_longer is not None:
        lines.append(f"**4x the context.** softmax's loss rises {show(soft_longer)} nats over its trained length's.")
        for name, row in rows.items():
            gap = longer_gap(row)
            if name == softmax_name or gap is None:
                continue
            holds = {"below": "holds it better than softmax", "above": "holds it worse than softmax",
                     "within noise of": "holds it as softmax does"}[compare(gap, soft_longer)]
            lines.append(f"- {name}: rises {show(gap)} nats, {holds}")
    return lines


def main(argv):
    if len(argv) not in (2, 3):
        print(__doc__.strip().splitlines()[-2], file=sys.stderr)
        return 2
    try:
        with open(argv[1]) as f:
            table = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        print(f"sink_cost_verdicts: {argv[1]}: {e}", file=sys.stderr)
        return 2
    print("\n".join(verdicts(table, argv[2] if len(argv) == 3 else "costs_softmax")))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
