#!/usr/bin/env python3
"""ctest `tensorboard_events`: `sinkc export --tensorboard` on the synthetic
runs of results_fixture, read back without TensorFlow, TensorBoard or
protobuf (none is packaged in Debian): the TFRecord framing, its CRC-32C
computed bit by bit from the polynomial, and the protobuf wire format decoded
by hand. Every (step, tag, value) must be what the run's metrics.jsonl says,
under the tag names TensorBoard users will see, and nothing else.

    check_tfevents.py SINKC RESULTS_FIXTURE WORK_DIR

With --live (ctest `tensorboard_live`), a short run trained by `sinkc run` is
read instead: the event file the runtime appended to as it trained holds every
evaluation as metrics.jsonl says, and the step's loss every train.log_every
steps as log.txt says; without a terminal, the same lines reached stderr.

    check_tfevents.py --live SINKC WORK_DIR
"""
import json
import math
import os
import re
import shutil
import struct
import subprocess
import sys
import tomllib


class Bad(Exception):
    pass


def crc32c(data):
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def masked(crc):
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def tfrecords(blob):
    at, out = 0, []
    while at < len(blob):
        if at + 12 > len(blob):
            raise Bad(f"truncated length header at byte {at}")
        header = blob[at:at + 8]
        (length,) = struct.unpack("<Q", header)
        (length_crc,) = struct.unpack("<I", blob[at + 8:at + 12])
        if length_crc != masked(crc32c(header)):
            raise Bad(f"length CRC mismatch at byte {at}")
        if at + 16 + length > len(blob):
            raise Bad(f"record at byte {at} runs past the end of the file")
        data = blob[at + 12:at + 12 + length]
        (data_crc,) = struct.unpack("<I", blob[at + 12 + length:at + 16 + length])
        if data_crc != masked(crc32c(data)):
            raise Bad(f"data CRC mismatch in the record at byte {at}")
        out.append(data)
        at += 16 + length
    return out


def varint(buf, at):
    value, shift = 0, 0
    while True:
        if at >= len(buf):
            raise Bad("varint runs past the end")
        byte = buf[at]
        at += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, at


def fields(buf):
    """(field number, wire type, value) of one message, in order."""
    at, out = 0, []
    while at < len(buf):
        key, at = varint(buf, at)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, at = varint(buf, at)
        elif wire == 1:
            value, at = buf[at:at + 8], at + 8
        elif wire == 2:
            n, at = varint(buf, at)
            value, at = buf[at:at + n], at + n
        elif wire == 5:
            value, at = buf[at:at + 4], at + 4
        else:
            raise Bad(f"wire type {wire} (field {number})")
        if at > len(buf):
            raise Bad(f"field {number} runs past the end")
        out.append((number, wire, value))
    return out


def event(buf):
    """An Event: wall_time 1 (double), step 2 (int64), file_version 3, summary 5.
    Anything else is a field the writer should not have written."""
    e = {"wall_time": None, "step": 0, "file_version": None, "values": None}
    for number, wire, value in fields(buf):
        if (number, wire) == (1, 1):
            e["wall_time"] = struct.unpack("<d", value)[0]
        elif (number, wire) == (2, 0):
            e["step"] = value - (1 << 64) if value >= 1 << 63 else value
        elif (number, wire) == (3, 2):
            e["file_version"] = value.decode()
        elif (number, wire) == (5, 2):
            e["values"] = summary(value)
        else:
            raise Bad(f"Event: unexpected field {number} (wire type {wire})")
    return e


def summary(buf):
    """Summary.value 1 (repeated Value): tag 1, simple_value 2 (float)."""
    out = []
    for number, wire, value in fields(buf):
        if (number, wire) != (1, 2):
            raise Bad(f"Summary: unexpected field {number} (wire type {wire})")
        tag, simple = None, None
        for n, w, v in fields(value):
            if (n, w) == (1, 2):
                tag = v.decode()
            elif (n, w) == (2, 5):
                simple = struct.unpack("<f", v)[0]
            else:
                raise Bad(f"Summary.Value: unexpected field {n} (wire type {w})")
        if tag is None or simple is None:
            raise Bad(f"Summary.Value without a tag or a simple_value: {tag!r}")
        out.append((tag, simple))
    return out


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def expected_points(line):
    """The TensorBoard series of one metrics.jsonl line, named as documented
    in docs/RESULTS.md. JSON null (not measured) has no point."""
    points = {}

    def add(tag, value):
        if value is not None and not (isinstance(value, float) and math.isnan(value)):
            points[tag] = f32(value)

    for k, v in (line.get("sink") or {}).items():
        add(f"sink_{int(k)}", v)
    add("sink_star", line.get("sink_star"))
    def mean(values):  # summed in order, as the C++ side does
        total = 0.0
        for v in values:
            total += v
        return total / len(values) if values else None

    add("alpha_1", mean([a for layer in line.get("alpha") or [] for a in layer]))
    add("valid_loss", line.get("valid_loss"))
    add("train_loss", line.get("train_loss"))
    massive = [m for m in (line.get("massive") or []) if m is not None and math.isfinite(m)]
    add("massive_max", max(massive) if massive else None)
    gate = line.get("gate") or []
    add("gate_mean", None if None in gate else mean(gate))  # a NaN (null) gate makes the mean NaN
    add("sink_logit", line.get("sink_logit"))
    finite = [m for m in (line.get("max_activation") or []) if m is not None and math.isfinite(m)]
    add("max_activation", max(finite) if finite else None)
    for metric, table in (("k1_norm_ratio", "key_norm_ratio"), ("v1_norm_ratio", "value_norm_ratio"),
                          ("q_k1_cos", "query_key_cos")):
        add(metric, mean([v for layer in line.get(table) or [] for v in layer]))

    def largest(key):
        finite = [m for m in (line.get(key) or []) if m is not None and math.isfinite(m)]
        return max(finite) if finite else None

    add("kurtosis_max", largest("residual_kurtosis"))
    add("attention_output_max", largest("attention_output_max"))
    add("attention_kurtosis_max", largest("attention_output_kurtosis"))
    add("tokens_per_s", line.get("tokens_per_s"))
    valid = line.get("valid_loss")
    # What a sink costs: the windowed and quantized losses as gaps over the valid loss, the longer contexts' losses.
    windowed = (line.get("windowed_loss") or {}).get("loss") or {}
    for k in sorted(windowed, key=int):
        add(f"windowed_gap_{int(k)}", None if windowed[k] is None else windowed[k] - valid)
    quantized = line.get("quantized_loss") or {}
    for q in sorted(quantized):
        add(f"quantized_gap_{q}", None if quantized[q] is None else quantized[q] - valid)
    longer = line.get("longer_context_loss") or {}
    for f in sorted(longer, key=int):
        add(f"longer_loss_{int(f)}", longer[f] if isinstance(longer[f], (int, float)) else None)
    add("lr", line.get("lr"))
    for name, key in (("alpha_1", "alpha"), ("alpha_star", "alpha_star")):
        for l, layer in enumerate(line.get(key) or []):
            for h, v in enumerate(layer):
                add(f"{name}/layer_{l}/head_{h}", v)
    for l, v in enumerate(line.get("massive") or []):
        add(f"massive/layer_{l}", v)
    for l, v in enumerate(line.get("gate") or []):
        add(f"gate/layer_{l}", v)
    for l, v in enumerate(line.get("max_activation") or []):
        add(f"max_activation/layer_{l}", v)
    for table in ("sink_logit_share", "key_norm_ratio", "value_norm_ratio", "query_key_cos"):
        for l, layer in enumerate(line.get(table) or []):
            for h, v in enumerate(layer):
                add(f"{table}/layer_{l}/head_{h}", v)
    for key in ("residual_kurtosis", "attention_output_max", "attention_output_kurtosis"):
        for l, v in enumerate(line.get(key) or []):
            add(f"{key}/layer_{l}", v)
    return points


def metrics_lines(run_dir):
    lines = []
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        for text in f:
            if text.strip():
                lines.append(json.loads(text))
    if not lines:  # a diverged run's last good evaluation may be in summary.final only
        try:
            with open(os.path.join(run_dir, "summary.json")) as f:
                final = json.load(f).get("final")
            if final:
                lines.append(final)
        except FileNotFoundError:
            pass
    return sorted(lines, key=lambda j: j.get("step", 0))


def check_run(run_dir, tb_dir):
    """Number of points checked; raises Bad on any difference."""
    with open(os.path.join(run_dir, "plan.toml"), "rb") as f:
        name = tomllib.load(f)["name"]
    lines = metrics_lines(run_dir)
    folder = os.path.join(tb_dir, name)
    if not lines:
        if os.path.exists(folder):
            raise Bad(f"{name}: no evaluation, yet {folder} was written")
        return 0
    files = os.listdir(folder)
    if len(files) != 1 or not re.fullmatch(r"events\.out\.tfevents\.\d{10,}\.[^/]+", files[0]):
        raise Bad(f"{name}: expected one events.out.tfevents.<time>.<host> file, found {files}")
    with open(os.path.join(folder, files[0]), "rb") as f:
        events = [event(r) for r in tfrecords(f.read())]
    if events[0]["file_version"] != "brain.Event:2" or events[0]["values"] is not None:
        raise Bad(f"{name}: the first record is not the file version: {events[0]}")
    got, wall = {}, 0.0
    for e in events[1:]:
        if e["values"] is None or e["file_version"] is not None:
            raise Bad(f"{name}: a record after the first is not a summary: {e}")
        if e["wall_time"] is None or e["wall_time"] < max(wall, 1e9):
            raise Bad(f"{name}: wall time {e['wall_time']} is not a date after the previous one ({wall})")
        wall = e["wall_time"]
        for tag, value in e["values"]:
            if (e["step"], tag) in got:
                raise Bad(f"{name}: {tag} twice at step {e['step']}")
            got[(e["step"], tag)] = value
    want = {}
    for line in lines:
        for tag, value in expected_points(line).items():
            want[(line["step"], tag)] = value
    for key in sorted(set(want) | set(got)):
        if key not in got:
            raise Bad(f"{name}: missing {key[1]} at step {key[0]}")
        if key not in want:
            raise Bad(f"{name}: unexpected {key[1]} at step {key[0]}")
        if got[key] != want[key]:
            raise Bad(f"{name}: {key[1]} at step {key[0]} is {got[key]!r}, metrics.jsonl says {want[key]!r}")
    return len(got)


def read_events(path, name):
    with open(path, "rb") as f:
        events = [event(r) for r in tfrecords(f.read())]
    if not events or events[0]["file_version"] != "brain.Event:2" or events[0]["values"] is not None:
        raise Bad(f"{name}: the first record is not the file version")
    return events[1:]


LIVE_SPEC = """import "stdlib/presets.sink"
experiment live extends micro {
  train { steps = 24  log_every = 4 }
  measure.every = 8
}
"""


def live(sinkc, work):
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    with open(os.path.join(work, "live.sink"), "w") as f:
        f.write(LIVE_SPEC)
    out = subprocess.run([sinkc, "run", "live.sink", "--out", "runs"], cwd=work, capture_output=True, text=True)
    if out.returncode != 0:
        print(out.stdout + out.stderr)
        print(f"FAIL: sinkc run exited {out.returncode}")
        return 1
    (leaf,) = [d for d in os.listdir(os.path.join(work, "runs")) if d.startswith("live-")]
    run_dir = os.path.join(work, "runs", leaf)
    files = [f for f in os.listdir(run_dir) if f.startswith("events.out.tfevents.")]
    try:
        if len(files) != 1:
            raise Bad(f"expected one event file in the run's folder, found {files}")
        got = {}
        for e in read_events(os.path.join(run_dir, files[0]), "live"):
            for tag, value in e["values"]:
                if (e["step"], tag) in got:
                    raise Bad(f"{tag} twice at step {e['step']}")
                got[(e["step"], tag)] = value
        want = {(line["step"], tag): v for line in metrics_lines(run_dir) for tag, v in expected_points(line).items()}
        evaluations = {k: v for k, v in got.items() if k[1] != "loss"}
        if evaluations != want:
            raise Bad(f"the evaluations differ from metrics.jsonl: {sorted(set(evaluations) ^ set(want))[:5]}")
        logged = {}
        with open(os.path.join(run_dir, "log.txt")) as f:
            for line in f:
                m = re.search(r" step (\d+)/\d+ loss ([0-9.]+) ", line)
                if m:
                    logged[int(m.group(1))] = float(m.group(2))
        losses = {k[0]: v for k, v in got.items() if k[1] == "loss"}
        if sorted(losses) != [4, 8, 12, 16, 20, 24] or sorted(logged) != sorted(losses):
            raise Bad(f"loss points at steps {sorted(losses)}, log.txt lines at {sorted(logged)}: every 4 steps wanted")
        for step, value in losses.items():
            if abs(value - logged[step]) > 6e-5:
                raise Bad(f"loss at step {step} is {value}, log.txt says {logged[step]}")
        lines = [l for l in out.stderr.splitlines() if re.search(r"^live step \d+/24 loss", l)]
        if len(lines) != 6:
            raise Bad(f"without a terminal, 6 progress lines on stderr were wanted, found {len(lines)}:\n{out.stderr}")
    except Bad as e:
        print(f"FAIL: {e}")
        return 1
    print(f"ok: {len(want)} evaluation points and {len(losses)} losses in {files[0]}, as the run wrote them")
    return 0


def main():
    if sys.argv[1] == "--live":
        return live(*sys.argv[2:4])
    sinkc, fixture, work = sys.argv[1:4]
    shutil.rmtree(work, ignore_errors=True)
    runs, tb = os.path.join(work, "runs"), os.path.join(work, "tb")
    os.makedirs(runs)
    subprocess.run([fixture, runs], check=True)
    out = subprocess.run([sinkc, "export", runs, "--tensorboard", tb], capture_output=True, text=True)
    print(out.stdout + out.stderr, end="")
    if "built without TensorBoard export" in out.stderr:
        print("SKIP: this sinkc was built without TensorBoard export")
        return 77
    if out.returncode != 0:
        print(f"FAIL: sinkc export exited {out.returncode}")
        return 1
    total, checked = 0, 0
    for leaf in sorted(os.listdir(runs)):
        run_dir = os.path.join(runs, leaf)
        if not os.path.isfile(os.path.join(run_dir, "plan.toml")):
            continue
        try:
            n = check_run(run_dir, tb)
        except Bad as e:
            print(f"FAIL: {e}")
            return 1
        total += n
        checked += n > 0
    if checked < 2 or total == 0:
        print(f"FAIL: only {checked} runs with points: the fixture changed?")
        return 1
    # The reader itself must be able to fail: one flipped bit in a record.
    folder = os.path.join(tb, sorted(os.listdir(tb))[0])
    path = os.path.join(folder, os.listdir(folder)[0])
    blob = bytearray(open(path, "rb").read())
    blob[len(blob) - 10] ^= 0x04
    try:
        tfrecords(bytes(blob))
        print("FAIL: a flipped bit went unnoticed by the CRC check")
        return 1
    except Bad:
        pass
    print(f"ok: {checked} runs, {total} points, as metrics.jsonl says")
    return 0


if __name__ == "__main__":
    sys.exit(main())
