// train.precision = auto and train.micro_batch = auto: what they resolve to
// for the paper's presets by GPU memory size (the table in docs/RUNNING.md), on
// a CPU, and that explicit values are left alone.
#include "runtime/training/auto_settings.h"

#include <gtest/gtest.h>

#include "runtime/training/model.h"
#include "runtime_test_util.h"

namespace {

using sink::Precision;
using sink::rt::DeviceFacts;

constexpr int64_t kGiB = int64_t(1) << 30;

DeviceFacts gpu(int64_t gib, int capability = 90) { return {true, gib * kGiB, capability}; }

sink::RunConfig preset(const std::string& name) {
  return sinktest::config_of("experiment x extends " + name + " { train { precision = auto  micro_batch = auto } }");
}

int64_t micro_for(const sink::RunConfig& cfg, const DeviceFacts& device, int64_t workers = 1) {
  return sink::rt::resolve_auto_settings(cfg, cfg.train.batch / workers, device).micro_batch;
}

TEST(AutoSettings, PaperPresetsSayAuto) {
  for (const std::string name : {"paper_60m", "paper_1b"}) {
    const sink::RunConfig cfg = sinktest::config_of("experiment x extends " + name + " {}");
    EXPECT_EQ(cfg.train.precision, Precision::auto_) << name;
    EXPECT_TRUE(cfg.train.micro_batch_auto) << name;
  }
}

TEST(AutoSettings, PrecisionIsBf16OnlyOnAGpuThatHasIt) {
  EXPECT_EQ(sink::rt::resolve_precision(Precision::auto_, DeviceFacts{}), Precision::fp32);
  EXPECT_EQ(sink::rt::resolve_precision(Precision::auto_, gpu(80, 90)), Precision::bf16);
  EXPECT_EQ(sink::rt::resolve_precision(Precision::auto_, gpu(40, 80)), Precision::bf16);
  EXPECT_EQ(sink::rt::resolve_precision(Precision::auto_, gpu(16, 70)), Precision::fp32);  // V100: no bf16 cores
  EXPECT_EQ(sink::rt::resolve_precision(Precision::auto_, gpu(16, 0)), Precision::fp32);   // capability unknown
  // Written values stay as written, on any device.
  EXPECT_EQ(sink::rt::resolve_precision(Precision::bf16, DeviceFacts{}), Precision::bf16);
  EXPECT_EQ(sink::rt::resolve_precision(Precision::fp32, gpu(80, 90)), Precision::fp32);
}

// The table of docs/RUNNING.md: paper_60m and paper_1b (batch 512 x 2048 tokens, bf16) by GPU memory.
TEST(AutoSettings, MicroBatchByGpuMemoryForThePaperPresets) {
  const sink::RunConfig small = preset("paper_60m"), large = preset("paper_1b");
  const std::vector<std::tuple<int64_t, int64_t, int64_t>> table = {
      // GiB, paper_60m, paper_1b
      {24, 16, 1}, {40, 32, 1}, {48, 32, 2}, {80, 64, 4}, {94, 64, 8}, {141, 128, 16}};
  for (auto [gib, micro_60m, micro_1b] : table) {
    EXPECT_EQ(micro_for(small, gpu(gib)), micro_60m) << gib << " GiB";
    EXPECT_EQ(micro_for(large, gpu(gib)), micro_1b) << gib << " GiB";
  }
  // More memory never means smaller passes; every size divides the batch.
  int64_t last = 1;
  for (int64_t gib = 8; gib <= 1024; gib += 8) {
    const int64_t micro = micro_for(small, gpu(gib));
    const int64_t rows = micro == 0 ? small.train.batch : micro;
    EXPECT_EQ(small.train.batch % rows, 0) << gib;
    EXPECT_GE(rows, last) << gib;
    last = rows;
  }
  // The whole batch in one pass where it fits: 512 x 2048 tokens of paper_60m need about 1.2 TB.
  EXPECT_EQ(micro_for(small, gpu(2048)), 0);
}

// Per worker: data parallel over 8 GPUs leaves 64 sequences each, which a 24 GiB GPU takes in passes of 16.
TEST(AutoSettings, MicroBatchDividesTheWorkersShare) {
  const sink::RunConfig cfg = preset("paper_60m");
  EXPECT_EQ(micro_for(cfg, gpu(24), 8), 16);
  EXPECT_EQ(micro_for(cfg, gpu(80), 8), 0);  // 64 each: one pass
  auto odd = sinktest::config_of(
      "experiment x extends paper_60m { train { batch = 24  precision = auto  micro_batch = auto } }");
  EXPECT_EQ(micro_for(odd, gpu(24)), 12);  // 16 to 23 fit: the largest divisor of 24 below that
}

// Runs sharing a GPU plan for their share of its memory: four paper_60m runs on an 80 GiB GPU take the passes
// one run takes on 20 GiB; a CPU is left as it is.
TEST(AutoSettings, RunsSharingAGpuPlanForTheirShare) {
  const sink::RunConfig cfg = preset("paper_60m");
  EXPECT_EQ(sink::rt::shared_by(gpu(80), 4).memory_bytes, 20 * kGiB);
  EXPECT_EQ(micro_for(cfg, sink::rt::shared_by(gpu(80), 4)), micro_for(cfg, gpu(20)));
  EXPECT_LT(micro_for(cfg, sink::rt::shared_by(gpu(80), 4)), micro_for(cfg, gpu(80)));
  EXPECT_EQ(sink::rt::shared_by(gpu(80), 1).memory_bytes, 80 * kGiB);
  EXPECT_EQ(sink::rt::shared_by(DeviceFacts{}, 4).memory_bytes, 0);
}

// fp32 activations are twice bf16's: smaller passes on the same GPU.
TEST(AutoSettings, Fp32NeedsSmallerPasses) {
  auto fp32 = sinktest::config_of("experiment x extends paper_60m { train { precision = fp32  micro_batch = auto } }");
  EXPECT_EQ(micro_for(fp32, gpu(24)), 8);
  EXPECT_EQ(micro_for(preset("paper_60m"), gpu(24)), 16);
  const auto half = sink::rt::estimate_training_memory(fp32.model, 2048, Precision::bf16);
  const auto full = sink::rt::estimate_training_memory(fp32.model, 2048, Precision::fp32);
  EXPECT_GT(full.per_sequence_bytes, half.per_sequence_bytes);
}

// The estimate's parameter count is the model's, within a few per cent (it leaves out small tables).
TEST(AutoSettings, EstimatedParametersMatchTheModel) {
  const sink::RunConfig cfg = sinktest::config_of("experiment x extends tiny_text {}");
  torch::manual_seed(0);
  sink::rt::Transformer model(cfg.model, torch::kCPU);
  double params = 0;
  for (const auto& p : model.parameters()) params += static_cast<double>(p.numel());
  const auto e = sink::rt::estimate_training_memory(cfg.model, cfg.train.context, Precision::fp32);
  EXPECT_NEAR(e.parameters / params, 1.0, 0.05) << e.parameters << " estimated, " << params << " in the model";
}

TEST(AutoSettings, ExplicitValuesAreNeverChanged) {
  auto cfg = sinktest::config_of("experiment x extends paper_60m { train { precision = fp32  micro_batch = 2 } }");
  for (const DeviceFacts& device : {DeviceFacts{}, gpu(24), gpu(141)}) {
    const auto r = sink::rt::resolve_auto_settings(cfg, cfg.train.batch, device);
    EXPECT_EQ(r.precision, Precision::fp32);
    EXPECT_EQ(r.micro_batch, 2);
    EXPECT_EQ(r.note, "");
  }
  cfg.train.micro_batch = 0;  // the whole batch, also where it cannot fit
  EXPECT_EQ(sink::rt::resolve_auto_settings(cfg, cfg.train.batch, gpu(24)).micro_batch, 0);
}

TEST(AutoSettings, ACpuStaysFp32InOnePass) {
  const auto r = sink::rt::resolve_auto_settings(preset("paper_60m"), 512, DeviceFacts{});
  EXPECT_EQ(r.precision, Precision::fp32);
  EXPECT_EQ(r.micro_batch, 0);
  EXPECT_NE(r.note.find("precision auto: fp32 (a CPU)"), std::string::npos) << r.note;
}

TEST(AutoSettings, AGpuOfUnknownMemoryIsAnErrorThatSaysWhatToSet) {
  try {
    sink::rt::resolve_auto_settings(preset("paper_60m"), 512, DeviceFacts{true, 0, 0});
    FAIL() << "resolved without the GPU's memory";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("set train.micro_batch"), std::string::npos) << e.what();
  }
}

// A model too large for the GPU still gets passes of one sequence, and the note says the estimate exceeds it.
TEST(AutoSettings, TooLargeForTheGpuSaysSo) {
  const auto r = sink::rt::resolve_auto_settings(preset("paper_1b"), 512, gpu(24));
  EXPECT_EQ(r.micro_batch, 1);
  EXPECT_NE(r.note.find("not to fit"), std::string::npos) << r.note;
}

// A run on the CPU with both set to auto trains in fp32 in one pass and records what auto became.
TEST(AutoSettings, ACpuRunRecordsWhatAutoBecame) {
  sinktest::TempDir out("auto-settings");
  auto result = sink::rt::run_plan(
      sinktest::plan_of("experiment a extends micro { train { precision = auto  micro_batch = auto  steps = 2 } }"),
      sinktest::run_options(out.str()));
  ASSERT_EQ(result.status, sink::rt::RunOutcome::Completed) << result.summary.dump(2);
  EXPECT_EQ(result.summary["precision"], "fp32");
  EXPECT_FALSE(result.summary.contains("micro_batch"));
  const std::string note = result.summary.value("auto_settings", "");
  EXPECT_NE(note.find("precision auto: fp32"), std::string::npos) << note;
  EXPECT_NE(note.find("micro_batch auto: all 4 sequences in one pass"), std::string::npos) << note;
}

}  // namespace
