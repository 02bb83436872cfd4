"""Sums a LibTorch profiler trace (Chrome format, as train_throughput writes
with SINKLAB_BENCH_PROFILE) by operator: self time (an operator's time less
that of the operators it called), its share of the traced wall time, and the
wall time no operator covers (on the JIT path: mostly the generated forward
kernel, which runs inside JitAttention's forward without an operator of its own).

usage: python3 bench/profile_summary.py TRACE.json [rows=25]
"""
import collections
import json
import sys


def main():
    text = open(sys.argv[1]).read().rstrip().rstrip(",")
    events = json.loads(text if text.endswith("]") else text + "]")
    spans = sorted((e for e in events if e.get("ph") == "X"), key=lambda e: (e["tid"], e["ts"], -e["dur"]))
    self_time = collections.Counter()
    calls = collections.Counter()
    covered = collections.Counter()  # per thread: time inside some top-level operator
    stack = []
    for e in spans:
        end = e["ts"] + e["dur"]
        while stack and (stack[-1]["tid"] != e["tid"] or stack[-1]["ts"] + stack[-1]["dur"] <= e["ts"]):
            stack.pop()
        if stack:
            self_time[stack[-1]["name"]] -= min(e["dur"], stack[-1]["ts"] + stack[-1]["dur"] - e["ts"])
        else:
            covered[e["tid"]] += e["dur"]
        self_time[e["name"]] += e["dur"]
        calls[e["name"]] += 1
        stack.append(dict(e, dur=end - e["ts"]))
    main_tid = max(covered, key=covered.get)
    mine = [e for e in spans if e["tid"] == main_tid]
    wall = max(e["ts"] + e["dur"] for e in mine) - min(e["ts"] for e in mine)
    rows = int(sys.argv[2]) if len(sys.argv) > 2 else 25
    print(f"traced wall time {wall / 1e3:.1f} ms on the main thread; outside any operator there: "
          f"{(wall - covered[main_tid]) / 1e3:.1f} ms ({100 * (wall - covered[main_tid]) / wall:.1f} %)")
    for tid, t in covered.items():
        if tid != main_tid:
            print(f"  thread {tid}: {t / 1e3:.1f} ms in operators (autograd's backward thread or a worker)")
    print(f"{'operator':<60} {'calls':>6} {'self ms':>9} {'share':>6}")
    for name, t in self_time.most_common(rows):
        print(f"{name[:60]:<60} {calls[name]:>6} {t / 1e3:>9.1f} {100 * t / wall:>5.1f}%")


if __name__ == "__main__":
    main()
