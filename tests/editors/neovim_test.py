#!/usr/bin/env python3
"""sinkc lsp in a real editor: Neovim (Debian's, 0.7) headless, its built-in
LSP client attached to a spec with an error; the diagnostics, a hover, a
completion and a formatting edit it got back are checked here.
Exit 77 (ctest: skipped) when there is no nvim."""
import json, os, shutil, subprocess, sys, tempfile

sinkc = sys.argv[1]
nvim = shutil.which("nvim")
if not nvim:
    print("skipped: no nvim on PATH (scripts/setup.sh --tests installs Debian's neovim)")
    sys.exit(77)
here = os.path.dirname(os.path.abspath(__file__))
with tempfile.TemporaryDirectory(prefix="sinklab-nvim-") as tmp:
    spec = os.path.join(tmp, "spec.sink")
    with open(spec, "w") as f:
        f.write('import "stdlib/presets.sink"\n\nexperiment a extends micro {\n'
                "  optim.lr = 1e-3\n  model { dd = 32 }\n  train{steps=10}\n}\n")
    out = os.path.join(tmp, "result.json")
    env = dict(os.environ, SINKC=sinkc, SPEC=spec, OUT=out, HOME=tmp, XDG_CONFIG_HOME=tmp, XDG_DATA_HOME=tmp,
               XDG_STATE_HOME=tmp, XDG_CACHE_HOME=tmp)
    run = subprocess.run([nvim, "--headless", "--clean", "-n", "-c", "luafile " + os.path.join(here, "neovim_lsp.lua")],
                         env=env, timeout=60, capture_output=True, text=True)
    if not os.path.exists(out):
        print("nvim wrote no result:", run.returncode, run.stdout, run.stderr)
        sys.exit(1)
    result = json.load(open(out))
    failures = []
    diagnostics = result["diagnostics"]
    if len(diagnostics) != 1 or diagnostics[0]["line"] != 4 or "did you mean 'model.d'" not in diagnostics[0]["message"]:
        failures.append("diagnostics: %r" % diagnostics)
    if "**optim.lr**" not in result["hover"] or "here: `0.001`" not in result["hover"]:
        failures.append("hover: %r" % result["hover"])
    if "heads" not in result["completion"] or "lr" in result["completion"]:
        failures.append("completion in the model block: %r" % result["completion"][:20])
    if "  train { steps = 10 }\n" not in result["formatted"]:
        failures.append("formatting: %r" % result["formatted"])
    for f in failures:
        print("FAILED", f)
    if not failures:
        print("ok: diagnostics, hover, completion and formatting through Neovim", subprocess.run(
            [nvim, "--version"], capture_output=True, text=True).stdout.splitlines()[0])
    sys.exit(1 if failures else 0)
