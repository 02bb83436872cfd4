// `sinkc --version` says what the runtime has compiled in apart from what the machine has: the CUDA backend
// (with or without an NVRTC found) and the GPUs visible, so a login node's install does not look broken.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "runtime/attention/cuda_driver.h"
#include "tests/source_paths.h"

TEST(Version, SaysWhatIsCompiledInApartFromTheDevices) {
  std::string out;
  FILE* pipe = popen((std::string(sinktest::sinkc_binary()) + " --version 2>&1").c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  char buffer[512];
  while (fgets(buffer, sizeof buffer, pipe)) out += buffer;
  ASSERT_EQ(pclose(pipe), 0) << out;
  const bool compiled = sink::rt::cuda::backend_compiled();
  EXPECT_NE(out.find(compiled ? "CUDA backend compiled in" : "CUDA backend not compiled in"), std::string::npos) << out;
  if (compiled)
    EXPECT_NE(out.find(sink::rt::cuda::nvrtc_available() ? "(NVRTC found)" : "(NVRTC not found here)"),
              std::string::npos)
        << out;
  EXPECT_NE(out.find(" visible"), std::string::npos) << out;
}
