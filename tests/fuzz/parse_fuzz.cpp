// libFuzzer target: arbitrary bytes through the whole front end, as `sinkc
// check` would see them in a file named on the command line.
//
// Beyond "no crash" (ASan, UBSan, and libFuzzer's own timeout and memory
// limits), it checks the front end's contract:
//   - errors and plans never come together;
//   - rendering the diagnostics works, whatever the input;
//   - every plan round-trips through TOML exactly, with the same hash.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "compiler/pipeline.h"

namespace {

[[noreturn]] void fail(const char* what, const std::string& detail) {
  std::fprintf(stderr, "parse_fuzz: %s\n%s\n", what, detail.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  sink::Options options;
  options.stdlib_dir = SINKLAB_SOURCE_DIR "/stdlib";
  sink::Compilation c(options);
  // A path in a folder that does not exist: relative imports find only the
  // stdlib and the source tree, never files the fuzzer happens to write.
  c.add_text("/nonexistent-fuzz-dir/input.sink", std::string(reinterpret_cast<const char*>(data), size));
  c.run();
  const std::string rendered = c.diagnostics().render(size % 2 == 1);
  if (c.diagnostics().has_errors()) {
    if (!c.plans().empty()) fail("plans produced alongside errors", rendered);
    if (rendered.find("error") == std::string::npos) fail("errors not rendered", rendered);
    return 0;
  }
  for (const auto& plan : c.plans()) {
    const std::string toml = sink::to_toml(plan);
    (void)sink::to_json(plan);
    sink::Plan back;
    try {
      back = sink::plan_from_toml(toml, "fuzz");
    } catch (const std::exception& e) {
      fail("a plan's TOML does not read back", std::string(e.what()) + "\n" + toml);
    }
    if (back.fields != plan.fields) fail("TOML round trip changed the plan", toml + "\n---\n" + sink::to_toml(back));
    if (back.hash() != plan.hash()) fail("TOML round trip changed the hash", toml);
  }
  return 0;
}
