"""scripts/gpu_check_report.py reads cuda_check's output as it was left: whole, cut short by a crash before the
summary line, or torn mid-line by a time limit. The counts come from the PASS and FAIL lines seen, so a crash
never turns a run of passing cases into "None of None cases passed".

    python3 tests/gpu/gpu_check_report_test.py SOURCE_DIR
"""
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
import unittest

SOURCE_DIR = sys.argv.pop(1) if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
SCRIPT = os.path.join(SOURCE_DIR, "scripts", "gpu_check_report.py")

spec = importlib.util.spec_from_file_location("gpu_check_report", SCRIPT)
report = importlib.util.module_from_spec(spec)
spec.loader.exec_module(report)

LIBRARIES = "NVRTC 13.0 (libnvrtc.so.13), driver 13.0 (libcuda.so.1)"
CASES = [
    "PASS softmax [float]                                   forward 1.2e-07 (< 1e-05), worst gradient dq 3.1e-07",
    "FAIL sigmoid [double]                                  forward 2.0e-03 (< 1e-09), worst gradient dk 1.0e-02",
    "SKIP sdpa: this LibTorch has no scaled_dot_product_attention",
    "PASS a run started on the GPU resumes on the CPU, in the same run directory   stopped on cuda, then completed",
]


class CudaCheckOutput(unittest.TestCase):
    def test_whole_output_is_complete_and_agrees_with_its_summary(self):
        text = "\n".join([LIBRARIES, *CASES, "2 of 3 cases passed"]) + "\n"
        checked = report.cuda_check(text)
        self.assertEqual((checked["passed"], checked["cases"]), (2, 3))
        self.assertTrue(checked["complete"])
        self.assertNotIn("summary_disagrees", checked)
        self.assertEqual(len(checked["failures"]), 1)
        self.assertEqual(len(checked["skipped"]), 1)
        self.assertEqual(report.cuda_check_line(checked), "cuda_check: 2 of 3 cases passed")

    def test_a_crash_before_the_summary_still_counts_the_cases_seen(self):
        text = "\n".join([LIBRARIES, *CASES]) + "\n"  # SIGSEGV after the last case: no summary line
        checked = report.cuda_check(text)
        self.assertEqual((checked["passed"], checked["cases"]), (2, 3))
        self.assertFalse(checked["complete"])
        self.assertTrue(checked["last_line"].startswith("PASS a run started on the GPU"))
        line = report.cuda_check_line(checked)
        self.assertIn("2 of 3 cases passed", line)
        self.assertIn("without the summary line", line)
        self.assertNotIn("None", line)

    def test_two_processes_sum_their_summaries_and_a_crash_report_is_kept(self):
        tuning = [LIBRARIES, "PASS tune: softmax, d_head 64, T 2048    3.1 s; forward [rows 64]", "1 of 1 cases passed"]
        text = "\n".join([LIBRARIES, *CASES, "2 of 3 cases passed", *tuning]) + "\n"
        checked = report.cuda_check(text)
        self.assertEqual((checked["passed"], checked["cases"]), (3, 4))
        self.assertTrue(checked["complete"])
        self.assertNotIn("summary_disagrees", checked)
        crashed = "\n".join([LIBRARIES, *CASES, "2 of 3 cases passed", LIBRARIES,
                              "CRASH signal 11 (address (nil)) during: tune: softmax, d_head 64, T 2048",
                              "  pc (nil)", "  [sp] 0x7f00: libsinkrt.so (sink_tune+0x40)", "afterwards"]) + "\n"
        checked = report.cuda_check(crashed)
        self.assertFalse(checked["complete"])
        self.assertEqual(len(checked["crash"]), 3)
        self.assertIn("during: tune: softmax", report.cuda_check_line(checked))
        self.assertEqual(len(checked["notes"]), 0)

    def test_the_tile_products_process_counts_with_the_others(self):
        tiles = [LIBRARIES, "PASS mma.sync products, d_head 64, bf16: S = A B^T      every element",
                 "FAIL wgmma products, d_head 64, bf16: S = A B^T         4096 of 4096 elements wrong (0 NaN; "
                 "largest error 25.2), rows 0-63, columns 0-63; (0, 0) holds (0, 8)'s value", "1 of 2 cases passed"]
        tuning = [LIBRARIES, "PASS tune: softmax, d_head 64, T 2048    3.1 s; forward [rows 64]", "1 of 1 cases passed"]
        checked = report.cuda_check("\n".join([*tiles, LIBRARIES, *CASES, "2 of 3 cases passed", *tuning]) + "\n")
        self.assertEqual((checked["passed"], checked["cases"]), (4, 6))
        self.assertTrue(checked["complete"])
        self.assertEqual(len(checked["failures"]), 2)
        self.assertIn("holds (0, 8)'s value", checked["failures"][0])
        cut = report.cuda_check("\n".join([*tiles[:2], LIBRARIES, *CASES, "2 of 3 cases passed", *tuning]) + "\n")
        self.assertFalse(cut["complete"], "the tile process printed no summary")

    def test_a_line_torn_by_the_time_limit_counts_by_its_verdict(self):
        text = "\n".join([LIBRARIES, CASES[0], "FAIL softmax [bf16 sto"])  # no newline at the end
        checked = report.cuda_check(text)
        self.assertEqual((checked["passed"], checked["cases"]), (1, 2))
        self.assertFalse(checked["complete"])

    def test_nothing_but_the_libraries_line_is_zero_cases_not_none(self):
        checked = report.cuda_check(LIBRARIES + "\n")
        self.assertEqual((checked["passed"], checked["cases"]), (0, 0))
        self.assertFalse(checked["complete"])

    def test_a_summary_that_disagrees_with_the_lines_is_flagged(self):
        text = "\n".join([LIBRARIES, *CASES, "3 of 3 cases passed"]) + "\n"
        checked = report.cuda_check(text)
        self.assertEqual((checked["passed"], checked["cases"]), (2, 3))
        self.assertTrue(checked["summary_disagrees"])
        self.assertIn("its own summary said", report.cuda_check_line(checked))

    def test_the_written_report_and_log_lines_from_a_truncated_output(self):
        with tempfile.TemporaryDirectory() as work, tempfile.TemporaryDirectory() as out:
            with open(os.path.join(work, "cuda_check.out"), "w") as f:
                f.write("\n".join([LIBRARIES, *CASES]) + "\n")
            step = {"name": "cuda_check", "status": "failed", "rc": 139, "seconds": 61, "limit_s": 240}
            with open(os.path.join(work, "steps.jsonl"), "w") as f:
                f.write(json.dumps(step) + "\n")
            printed = subprocess.run(
                [sys.executable, SCRIPT, work, out, "checks", "600", str(int(time.time()))],
                check=True, capture_output=True, text=True).stdout
            with open(os.path.join(out, "gpu-check.json")) as f:
                written = json.load(f)
        self.assertEqual(written["cuda_check"]["passed"], 2)
        self.assertEqual(written["cuda_check"]["cases"], 3)
        self.assertFalse(written["cuda_check"]["complete"])
        self.assertIn("cuda_check: 2 of 3 cases passed", printed)
        self.assertNotIn("None of None", printed)


class FailedMeasurements(unittest.TestCase):
    def test_the_tuning_tables_failures_are_listed_with_their_tiles(self):
        table = {"GPU | softmax | bf16 storage | d_head 64": {"forward": {}},
                 "failed": [{"gpu": "GPU", "key": "GPU | softmax", "kernel": "forward",
                             "tiles": {"forward_rows": 64, "hopper": True}, "why": "lost the device", "at": "now"}]}
        failed = report.failed_measurements(json.dumps(table))
        self.assertEqual(len(failed), 1)
        self.assertEqual(failed[0]["tiles"], "forward_rows 64, hopper True")
        self.assertEqual((failed[0]["kernel"], failed[0]["why"]), ("forward", "lost the device"))

    def test_no_table_or_not_a_table_lists_nothing(self):
        for text in (None, "", "not json", "[1, 2]", '{"failed": 3}', '{"failed": [3]}'):
            self.assertEqual(report.failed_measurements(text), [], text)


class NaturalRuns(unittest.TestCase):
    def write_run(self, work, folder, sinks, status="interrupted"):
        run_dir = os.path.join(work, "runs", folder)
        os.makedirs(run_dir)
        with open(os.path.join(run_dir, "metrics.jsonl"), "w") as f:
            for k, sink in enumerate(sinks):
                # Two layers of two heads: alpha_1's mean is the mean of the four.
                alpha = [[0.1 * k, 0.2 * k], [0.3 * k, 0.4 * k]]
                f.write(json.dumps({"step": 250 * (k + 1), "tokens": 4096000 * (k + 1), "sink": {"1": sink},
                                    "alpha": alpha}) + "\n")
        with open(os.path.join(run_dir, "summary.json"), "w") as f:
            json.dump({"status": status, "steps_done": 250 * len(sinks)}, f)

    def test_each_runs_curve_and_the_first_measurement_over_ten_percent(self):
        with tempfile.TemporaryDirectory() as work:
            self.write_run(work, "ladder_softmax_d384-0a11a625", [0.0, 3.5, 12.5, 9.0])
            self.write_run(work, "ladder_sigmoid_d384-7b80d239", [0.0, 0.2, 0.1])
            runs = report.natural_runs(work)
        softmax, sigmoid = runs["ladder_softmax_d384"], runs["ladder_sigmoid_d384"]
        self.assertEqual(softmax["measurements"], 4)
        self.assertEqual(softmax["sink_1_over_10_at_tokens"], 3 * 4096000)
        self.assertEqual(softmax["curve"][2], [3 * 4096000, 12.5, 0.5])
        self.assertIsNone(sigmoid["sink_1_over_10_at_tokens"])
        self.assertEqual((sigmoid["status"], sigmoid["steps_done"]), ("interrupted", 750))


class SharingTheGpu(unittest.TestCase):
    """Runs that share the GPU: each run's steady speed recovered from its progress lines, which give tokens/s since
    the process began, start-up included."""

    TOKENS_PER_STEP = 64 * 256

    def write_run(self, work, folder, startup_s, step_s, steps=1000, every=50, restart_at=None):
        run_dir = os.path.join(work, folder)
        os.makedirs(run_dir)
        name = os.path.basename(folder).rsplit("-", 1)[0]
        with open(os.path.join(run_dir, "plan.toml"), "w") as f:
            f.write(f'name = "{name}"\n\n[train]\nbatch = 64\ncontext = 256\nsteps = 60000\n')
        with open(os.path.join(run_dir, "log.txt"), "w") as f:
            f.write("config: ...\n")
            for step in range(every, steps + 1, every):
                shown = step if restart_at is None or step < restart_at else step - restart_at + every
                # The first ten steps hold the start-up (the kernels' compilation and tuning).
                seconds = startup_s * min(shown, 10) / 10 + step_s * max(shown - 10, 0)
                rate = shown * self.TOKENS_PER_STEP / seconds
                f.write(f"{name} step {shown}/60000 loss 2.0000 lr 3.00e-03 {rate / 1000:.1f}k tok/s ETA 1h00m\n")

    def test_the_steady_speed_leaves_the_start_up_out(self):
        with tempfile.TemporaryDirectory() as work:
            self.write_run(work, "ladder_a-1234", startup_s=5.0, step_s=0.02)
            steady = report.steady_tokens_per_s(os.path.join(work, "ladder_a-1234"))
        # Over the whole run the lines say 660.6k; the second half ran at 16,384 tokens / 0.02 s.
        self.assertAlmostEqual(steady / (self.TOKENS_PER_STEP / 0.02), 1.0, delta=1e-3)

    def test_a_resumed_or_barely_logged_run_has_no_steady_speed(self):
        with tempfile.TemporaryDirectory() as work:
            self.write_run(work, "resumed-1", startup_s=5.0, step_s=0.02, restart_at=500)
            self.write_run(work, "short-2", startup_s=5.0, step_s=0.02, steps=50)
            self.assertIsNone(report.steady_tokens_per_s(os.path.join(work, "resumed-1")))
            self.assertIsNone(report.steady_tokens_per_s(os.path.join(work, "short-2")))
            self.assertIsNone(report.steady_tokens_per_s(os.path.join(work, "no-such-run")))

    def test_runs_at_once_against_the_first_alone(self):
        with tempfile.TemporaryDirectory() as work:
            self.write_run(work, "alone/ladder_a-1234", startup_s=5.0, step_s=0.02)
            # Beside each other, each step takes three times as long: three runs give what one alone gives.
            for folder in ("runs/ladder_a-1234", "runs/ladder_b-5678", "runs/ladder_c-9abc"):
                self.write_run(work, folder, startup_s=8.0, step_s=0.06)
            shared = report.sharing(work)
        self.assertEqual((shared["run"], shared["runs_at_once"]), ("ladder_a", 3))
        alone = self.TOKENS_PER_STEP / 0.02
        self.assertAlmostEqual(shared["alone_tokens_per_s"] / alone, 1.0, delta=1e-3)
        self.assertAlmostEqual(shared["shared_tokens_per_s"]["ladder_b"] / (alone / 3), 1.0, delta=1e-3)
        self.assertAlmostEqual(shared["total_tokens_per_s"] / alone, 1.0, delta=1e-3)
        self.assertAlmostEqual(shared["shared_over_alone"], 1 / 3, delta=1e-3)
        self.assertAlmostEqual(shared["runs_at_once_over_one_alone"], 1.0, delta=0.01)

    def test_nothing_trained_alone_is_no_comparison(self):
        with tempfile.TemporaryDirectory() as work:
            self.write_run(work, "runs/ladder_a-1234", startup_s=5.0, step_s=0.02)
            self.assertIsNone(report.sharing(work))


if __name__ == "__main__":
    unittest.main()
