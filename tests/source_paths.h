// Where a test or benchmark finds the source tree and the built tools (library sinktestpaths). The paths are
// compiled into tests/source_paths.cpp alone: the files that read them compile the same in every clone.
#pragma once

namespace sinktest {

// The repository's root folder.
const char* source_dir();
// The build's sinkc; "" where the build has no front end.
const char* sinkc_binary();

}  // namespace sinktest
