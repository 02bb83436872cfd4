#include "tests/source_paths.h"

#ifndef SINKC_BINARY
#define SINKC_BINARY ""
#endif

namespace sinktest {

const char* source_dir() { return SINKLAB_SOURCE_DIR; }
const char* sinkc_binary() { return SINKC_BINARY; }

}  // namespace sinktest
