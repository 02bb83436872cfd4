"""What the torch 2.x benchmarks (pytorch_twin.py --compile, attention_vs_torch2.py)
need before torch.compile runs on the CPU.

Inductor links the C++ it generates with -L<Python's LIBDIR> ahead of torch's
own lib folder. On a machine that also has Debian's python3-torch (this
project's, for the 1.13 comparisons), that LIBDIR, /usr/lib/x86_64-linux-gnu,
holds LibTorch 1.13's libtorch_cpu.so: the kernels link against it, fail to
load (undefined Sleef_* symbols), and inductor's check of the CPU's vector
ISA fails with them, so every kernel it generates is scalar code and
FlexAttention's CPU template refuses to lower at all. Inductor links no
libpython on Linux, so the folder is dropped from its library path here.

Its cache gets a folder of its own, so that nothing built with the wrong
link is reused, and one per thread count: the C++ inductor generates has the
thread count built in, and a FlexAttention kernel compiled for one thread
corrupted the heap when the cache handed it to a two-thread run.
"""
import os
import sysconfig


def fix_inductor(threads):
    """Call once the thread count is known, before the first torch.compile (inductor reads the folder lazily)."""
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = f"/tmp/sinklab-torchinductor-{threads}t"
    libdir = sysconfig.get_config_var("LIBDIR")
    if not libdir or not os.path.exists(os.path.join(libdir, "libtorch_cpu.so")):
        return
    import torch._inductor.cpp_builder as builder

    python_args = builder._get_python_related_args

    def without_libdir():
        include_dirs, lib_dirs = python_args()
        return include_dirs, [d for d in lib_dirs if d != libdir]

    builder._get_python_related_args = without_libdir
