"""Runs each case's NVPTX forward kernel (sm_90 cubin) on the GPU and
compares its output with the LibTorch reference path's, computed in double
where the cases were written (ptx_fixtures.cpp). Needs CuPy and a GPU.

usage: python3 check_ptx.py CASES_DIR [TOLERANCE]
"""
import json
import sys

import cupy as cp
import numpy as np


def main():
    root = sys.argv[1]
    tolerance = float(sys.argv[2]) if len(sys.argv) > 2 else 1e-4
    cases = json.load(open(f"{root}/manifest.json"))
    print(f"device: {cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}")
    print(f"{'case':<8} {'variant':<50} {'rel error':>10}  result")
    failures = 0
    for case in cases:
        where = f"{root}/{case['id']}"
        kernel = cp.RawModule(path=f"{where}/forward.cubin").get_function("sink_forward")

        def load(name):
            return cp.asarray(np.fromfile(f"{where}/{name}.f32", dtype=np.float32))

        q, kt, v, g, kstar, vstar, sink = (load(n) for n in ("q", "kt", "v", "g", "kstar", "vstar", "sink"))
        o = cp.full_like(q, cp.nan)
        stats = cp.zeros(case["slices"] * 2 * case["Tp"], dtype=cp.float32)
        threads = 32
        blocks = (case["slices"] + threads - 1) // threads
        kernel((blocks,), (threads,),
               (q, kt, v, g, kstar, vstar, sink, o, stats,
                np.int64(case["T"]), np.int64(case["Tp"]), np.int64(case["slices"]),
                np.int64(case["heads"]), np.int64(case["T"]), np.int64(case["D"])))
        cp.cuda.runtime.deviceSynchronize()
        got = o.get().astype(np.float64)
        expected = np.fromfile(f"{where}/expected.f64", dtype=np.float64)
        error = np.max(np.abs(got - expected)) / max(np.max(np.abs(expected)), 1e-12)
        ok = np.all(np.isfinite(got)) and error < tolerance
        failures += not ok
        print(f"{case['id']:<8} {case['name'][:50]:<50} {error:10.2e}  {'ok' if ok else 'FAIL'}")
    print(f"{len(cases) - failures}/{len(cases)} cases within {tolerance:g} of the reference")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
