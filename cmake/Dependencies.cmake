# Header and small-library dependencies, found on the system (Debian's -dev
# packages) or, where a machine lacks them (a GPU node with only a pip
# PyTorch), in the folder SINKLAB_DEPS_DIR: its include/ holds the headers of
# fmt, toml++, nlohmann/json and CLI11, used header-only.
# `scripts/pack-deps.sh DIR` fills such a folder from this machine's packages.
set(SINKLAB_DEPS_DIR "" CACHE PATH "folder whose include/ has fmt, toml++, nlohmann, CLI11 headers (used when not installed)")

function(sinklab_header_only target header definitions)
  if(TARGET ${target})
    return()
  endif()
  if(NOT SINKLAB_DEPS_DIR OR NOT EXISTS "${SINKLAB_DEPS_DIR}/include/${header}")
    message(FATAL_ERROR "${target}: not installed, and ${header} is not in SINKLAB_DEPS_DIR/include "
                        "('${SINKLAB_DEPS_DIR}'). Install Debian's package or run scripts/pack-deps.sh.")
  endif()
  add_library(${target} INTERFACE IMPORTED GLOBAL)
  target_include_directories(${target} SYSTEM INTERFACE "${SINKLAB_DEPS_DIR}/include")
  target_compile_definitions(${target} INTERFACE ${definitions})
  message(STATUS "${target}: header-only from ${SINKLAB_DEPS_DIR}/include")
endfunction()

find_package(fmt QUIET)
sinklab_header_only(fmt::fmt fmt/format.h FMT_HEADER_ONLY=1)
find_package(tomlplusplus QUIET)
sinklab_header_only(tomlplusplus::tomlplusplus toml++/toml.h TOML_HEADER_ONLY=1)
find_package(nlohmann_json QUIET)
sinklab_header_only(nlohmann_json::nlohmann_json nlohmann/json.hpp "")
if(SINKLAB_FRONTEND OR SINKLAB_RUNTIME)
  find_package(CLI11 QUIET)
  sinklab_header_only(CLI11::CLI11 CLI/CLI.hpp "")
endif()

