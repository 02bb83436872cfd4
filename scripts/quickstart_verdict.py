#!/usr/bin/env python3
"""What the quickstart measured, in words computed from its numbers: reads `sinkc table --format json` of the
quickstart's runs (Sink_1 and valid loss as mean and standard deviation over seeds) and says whether the two
sides' noise bars (mean ± one standard deviation) are apart, and which way.

usage: quickstart_verdict.py TABLE_JSON SOFTMAX_RUN SIGMOID_RUN
Exit 0 when softmax's bar lies above sigmoid's, 1 when the bars overlap or the order is reversed, 2 on bad input.
"""
import json
import sys
import textwrap


def side(table, name):
    for row in table["rows"]:
        if row.get("run") == name:
            return row
    raise SystemExit(f"quickstart_verdict: no run {name!r} in the table (runs: "
                     f"{', '.join(str(r.get('run')) for r in table['rows'])})")


def number(row, key):
    value = row.get(key)
    if value is None:
        raise SystemExit(f"quickstart_verdict: run {row.get('run')!r} has no {key} (did it finish?)")
    return float(value), float(row.get(key + "_std") or 0.0)


def bar(mean, std, seeds):
    return f"{mean:.1f} % ± {std:.1f} over {seeds} seed{'s' if seeds != 1 else ''}"


def verdict(table, softmax_name, sigmoid_name):
    """(apart, lines): whether softmax's noise bar lies wholly above sigmoid's, and the text that says so."""
    soft, sig = side(table, softmax_name), side(table, sigmoid_name)
    (s_mean, s_std), (g_mean, g_std) = number(soft, "sink_1"), number(sig, "sink_1")
    s_seeds, g_seeds = int(soft.get("seeds") or 1), int(sig.get("seeds") or 1)
    (s_loss, _), (g_loss, _) = number(soft, "valid_loss"), number(sig, "valid_loss")
    apart = s_mean - s_std > g_mean + g_std
    lines = [f"Sink_1: softmax {bar(s_mean, s_std, s_seeds)}, sigmoid without normalization "
             f"{bar(g_mean, g_std, g_seeds)}; valid loss {s_loss:.4f} against {g_loss:.4f} nats/token."]
    if apart:
        strength = "does not form" if g_mean + g_std < 5 else "is much weaker"
        lines.append(f"The noise bars (mean ± one standard deviation) are apart: with softmax the heads put more "
                     f"than 0.3 of their attention on the first token, and with sigmoid attention and no "
                     f"normalization the sink {strength}, at a loss within {abs(s_loss - g_loss):.4f} nats: the "
                     f"paper's finding that the sink comes from softmax's sum-to-one (Section 7).")
    else:
        lines.append("The noise bars overlap (or sigmoid's lies higher): at this size and with these seeds the run "
                     "does not show the contrast. More seeds (train.seeds) or steps (train.steps) narrow the bars.")
    return apart, lines


def main(argv):
    if len(argv) != 4:
        print(__doc__.strip().splitlines()[-2], file=sys.stderr)
        return 2
    try:
        with open(argv[1]) as f:
            table = json.load(f)
    except (OSError, ValueError) as e:
        print(f"quickstart_verdict: cannot read {argv[1]}: {e}", file=sys.stderr)
        return 2
    apart, lines = verdict(table, argv[2], argv[3])
    print("\n".join(textwrap.fill(line, 110) for line in lines))
    return 0 if apart else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
