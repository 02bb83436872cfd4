// results/tensorboard.h in a build configured without protobuf or ISA-L:
// the command exists and says what it needs, rather than being absent.
#include "results/tensorboard.h"

namespace sink::results {

bool tensorboard_supported() { return false; }

void require_tensorboard() {
  throw ResultsError(
      "this sinkc was built without TensorBoard export: install libprotobuf-dev, protobuf-compiler and libisal-dev "
      "(scripts/setup.sh does), then configure and build again");
}

TensorBoardExport write_tensorboard(const std::vector<RunData>&, const std::string&) {
  require_tensorboard();
  return {};
}

uint32_t crc32c(const void*, size_t) { throw ResultsError("crc32c: built without ISA-L"); }
uint32_t masked_crc32c(const void*, size_t) { throw ResultsError("crc32c: built without ISA-L"); }

}  // namespace sink::results
