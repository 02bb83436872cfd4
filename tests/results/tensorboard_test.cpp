// `sinkc export --tensorboard`: the event files read back through a TFRecord
// reader, a CRC-32C and a protobuf wire-format decoder written here, apart from
// the writer's (results/tfevents.cpp). tests/results/check_tfevents.py reads
// them a third way, in Python.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sys/wait.h>

#include "results/metrics.h"
#include "results/tensorboard.h"
#include "results/tfevents.h"
#include "synthetic_runs.h"

using namespace sink;
using namespace sink::results;
using sink::tfevents::crc32c;
using sink::tfevents::masked_crc32c;
using namespace sink::testing;
namespace fs = std::filesystem;

namespace {

// Bit by bit, from the reflected Castagnoli polynomial: the definition, not a table.
uint32_t bitwise_crc32c(const std::string& bytes) {
  uint32_t crc = 0xFFFFFFFFu;
  for (unsigned char c : bytes) {
    crc ^= c;
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1u)));
  }
  return ~crc;
}

uint32_t masked(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

uint64_t le(const std::string& s, size_t at, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= uint64_t{static_cast<unsigned char>(s.at(at + i))} << (8 * i);
  return v;
}

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), {}};
}

// The records of a TFRecord file; a framing or CRC error fails the test.
std::vector<std::string> records(const std::string& file) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at < file.size()) {
    EXPECT_LE(at + 12, file.size()) << "truncated header at " << at;
    if (at + 12 > file.size()) break;
    const uint64_t n = le(file, at, 8);
    EXPECT_EQ(le(file, at + 8, 4), masked(bitwise_crc32c(file.substr(at, 8)))) << "length CRC at " << at;
    EXPECT_LE(at + 16 + n, file.size()) << "truncated record at " << at;
    if (at + 16 + n > file.size()) break;
    std::string data = file.substr(at + 12, n);
    EXPECT_EQ(le(file, at + 12 + n, 4), masked(bitwise_crc32c(data))) << "data CRC at " << at;
    out.push_back(std::move(data));
    at += 16 + n;
  }
  return out;
}

std::vector<std::string> event_files(const fs::path& folder) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(folder, ec)) out.push_back(e.path().filename().string());
  return out;
}

// Two evaluations of a micro run (2 layers x 2 heads), with a value of exactly 0.
SyntheticRun micro_run(const std::string& name) {
  auto plans = compile_plans("experiment " + name + " extends micro {}\n");
  EvalLine last;
  last.sink = {{1, 40.0}, {2, 0.0}};
  last.alpha = {{0.75, 0.25}, {0.5, 0.125}};
  last.massive = {2.0, 30.0};
  last.gate = {0.25, 0.75};
  auto evals = curve(2, last);
  return {plans[0], "completed", "", evals};
}

// The two Events the writer writes, decoded from protobuf's wire format: Event {wall_time 1 (double), step 2
// (varint), file_version 3 (string), summary 5 (Summary {repeated Value value 1 {tag 1, simple_value 2 (float)}})}.
struct DecodedValue {
  std::string tag;
  float simple_value = 0;
  bool has_simple_value = false;
};
struct DecodedEvent {
  double wall_time = 0;
  int64_t step = 0;
  std::string file_version;
  bool has_summary = false;
  std::vector<DecodedValue> values;
};

struct WireReader {
  const std::string& buf;
  size_t at = 0;
  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; at < buf.size(); shift += 7) {
      const auto byte = static_cast<unsigned char>(buf[at++]);
      v |= uint64_t(byte & 0x7F) << shift;
      if (!(byte & 0x80)) return v;
    }
    ADD_FAILURE() << "a varint runs past the end";
    return v;
  }
  template <typename T>
  T fixed() {
    T v{};
    if (at + sizeof v > buf.size()) return ADD_FAILURE() << "a fixed field runs past the end", v;
    std::memcpy(&v, buf.data() + at, sizeof v);
    at += sizeof v;
    return v;
  }
  std::string bytes() {
    const size_t n = varint();
    if (at + n > buf.size()) return ADD_FAILURE() << "a string runs past the end", std::string();
    at += n;
    return buf.substr(at - n, n);
  }
};

DecodedEvent decode_event(const std::string& buf) {
  DecodedEvent e;
  for (WireReader r{buf}; r.at < buf.size();) {
    const uint64_t key = r.varint();
    if (key == (1 << 3 | 1))
      e.wall_time = r.fixed<double>();
    else if (key == (2 << 3 | 0))
      e.step = static_cast<int64_t>(r.varint());
    else if (key == (3 << 3 | 2))
      e.file_version = r.bytes();
    else if (key == (5 << 3 | 2)) {
      e.has_summary = true;
      const std::string summary = r.bytes();
      for (WireReader s{summary}; s.at < summary.size();) {
        EXPECT_EQ(s.varint(), 1u << 3 | 2) << "Summary holds Values only";
        const std::string value = s.bytes();
        DecodedValue v;
        for (WireReader f{value}; f.at < value.size();) {
          const uint64_t field = f.varint();
          if (field == (1 << 3 | 2))
            v.tag = f.bytes();
          else if (field == (2 << 3 | 5))
            v.simple_value = f.fixed<float>(), v.has_simple_value = true;
          else
            ADD_FAILURE() << "Value: unexpected key " << field;
        }
        e.values.push_back(v);
      }
    } else {
      ADD_FAILURE() << "Event: unexpected key " << key;
      break;
    }
  }
  return e;
}

}  // namespace

TEST(TensorBoard, Crc32cMatchesTheDefinition) {
  EXPECT_EQ(crc32c("123456789", 9), 0xE3069283u);  // the CRC-32C check value
  std::string bytes;
  for (int n = 0; n < 2000; ++n) {
    bytes.push_back(static_cast<char>((n * 131 + 7) & 0xFF));
    if (n % 97 == 0 || n < 20)
      ASSERT_EQ(crc32c(bytes.data(), bytes.size()), bitwise_crc32c(bytes)) << "length " << n + 1;
  }
  EXPECT_EQ(masked_crc32c(bytes.data(), bytes.size()), masked(bitwise_crc32c(bytes)));
}

TEST(TensorBoard, EveryEvaluationIsAnEventOfItsSeries) {
  TempDir tmp("tb");
  const std::string dir = write_run(tmp.path + "/runs", micro_run("m"));
  TensorBoardExport done = write_tensorboard({load_run(dir)}, tmp.path + "/tb");
  ASSERT_EQ(done.written.size(), 1u);
  EXPECT_EQ(done.written[0].run, "m");
  EXPECT_EQ(done.written[0].events, 2u);
  auto files = event_files(tmp.path + "/tb/m");
  ASSERT_EQ(files.size(), 1u);
  EXPECT_EQ(files[0].rfind("events.out.tfevents.", 0), 0u) << files[0];

  auto recs = records(slurp(done.written[0].file));
  ASSERT_EQ(recs.size(), 3u);
  const DecodedEvent version = decode_event(recs[0]);
  EXPECT_EQ(version.file_version, "brain.Event:2");

  std::map<std::pair<int64_t, std::string>, float> points;
  double previous_wall = 0;
  for (size_t i = 1; i < recs.size(); ++i) {
    const DecodedEvent e = decode_event(recs[i]);
    ASSERT_TRUE(e.has_summary);
    EXPECT_GE(e.wall_time, previous_wall);
    previous_wall = e.wall_time;
    for (const auto& v : e.values) {
      // A oneof member is on the wire even at 0.0; TensorBoard drops a value without it.
      EXPECT_TRUE(v.has_simple_value) << v.tag;
      EXPECT_TRUE(points.emplace(std::make_pair(e.step, v.tag), v.simple_value).second) << "twice: " << v.tag;
    }
  }
  // curve(2, last): step 10 is half way to the last numbers, losses 0.3 and 0.35 above them.
  EXPECT_FLOAT_EQ(points.at({10, "sink_1"}), 20.0f);
  EXPECT_FLOAT_EQ(points.at({20, "sink_1"}), 40.0f);
  EXPECT_EQ(points.at({20, "sink_2"}), 0.0f);
  EXPECT_FLOAT_EQ(points.at({10, "valid_loss"}), 2.3f);
  EXPECT_FLOAT_EQ(points.at({20, "train_loss"}), 2.1f);
  EXPECT_FLOAT_EQ(points.at({20, "alpha_1"}), (0.75f + 0.25f + 0.5f + 0.125f) / 4);
  EXPECT_FLOAT_EQ(points.at({20, "alpha_1/layer_1/head_1"}), 0.125f);
  EXPECT_FLOAT_EQ(points.at({20, "massive/layer_1"}), 30.0f);
  EXPECT_FLOAT_EQ(points.at({20, "massive_max"}), 30.0f);
  EXPECT_FLOAT_EQ(points.at({20, "lr"}), 1e-3f);
  EXPECT_FLOAT_EQ(points.at({20, "gate/layer_1"}), 0.75f);
  EXPECT_FLOAT_EQ(points.at({20, "gate_mean"}), 0.5f);
  EXPECT_EQ(points.count({20, "sink_star"}), 0u);  // not measured: no point rather than a NaN
  // Every point is one of the registry's series, and every series has both steps.
  std::set<std::string> tags;
  for (const auto& [key, value] : points) tags.insert(key.second);
  EXPECT_EQ(points.size(), 2 * tags.size());
  for (const auto& s : eval_series(load_run(dir).evals.back())) EXPECT_TRUE(tags.count(s.name)) << s.name;
}

TEST(TensorBoard, ExportingAgainReplacesTheRunsEventFile) {
  TempDir tmp("tb");
  const std::string dir = write_run(tmp.path + "/runs", micro_run("m"));
  const fs::path folder = tmp.path + "/tb/m";
  fs::create_directories(folder);
  std::ofstream(folder / "events.out.tfevents.1.elsewhere") << "an earlier export";
  std::ofstream(folder / "notes.txt") << "the user's";
  write_tensorboard({load_run(dir)}, tmp.path + "/tb");
  auto files = event_files(folder);
  std::sort(files.begin(), files.end());
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(files[1], "notes.txt");
  EXPECT_NE(files[0], "events.out.tfevents.1.elsewhere");
}

TEST(TensorBoard, RunsSharingANameGetTheirHashToo) {
  TempDir tmp("tb");
  SyntheticRun a = micro_run("m");
  SyntheticRun b = micro_run("m");
  b.plan.fields["optim.weight_decay"].f = 0.5;  // the same name, another plan: an older version of the spec
  ASSERT_NE(a.plan.hash8(), b.plan.hash8());
  SyntheticRun none = micro_run("not_yet");
  none.evals.clear();
  write_run(tmp.path + "/runs", a);
  write_run(tmp.path + "/runs", b);
  write_run(tmp.path + "/runs", none);
  TensorBoardExport done = write_tensorboard(load_run_folder(tmp.path + "/runs"), tmp.path + "/tb");
  ASSERT_EQ(done.written.size(), 2u);
  EXPECT_TRUE(fs::is_directory(tmp.path + "/tb/" + a.plan.dir_name()));
  EXPECT_TRUE(fs::is_directory(tmp.path + "/tb/" + b.plan.dir_name()));
  ASSERT_EQ(done.skipped.size(), 1u);
  EXPECT_NE(done.skipped[0].find("not_yet: no evaluation yet"), std::string::npos) << done.skipped[0];
}
