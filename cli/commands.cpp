#include "cli/commands.h"

#include <algorithm>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <iostream>
#include <unistd.h>

#include "cli/targets.h"
#include "compiler/format.h"
#include "kernels/cuda/emit_cuda.h"
#include "kernels/llvm/emit_llvm.h"
#include "plan/schema.h"

namespace sink::cli {
namespace fs = std::filesystem;

// A directory stands for the specs under it, in name order (as `sinkc run DIR`).
std::vector<std::string> spec_files(const std::vector<std::string>& targets) {
  std::vector<std::string> files;
  std::error_code ec;
  for (const auto& t : targets) {
    if (!fs::is_directory(t, ec)) {
      files.push_back(t);
      continue;
    }
    std::vector<std::string> found;
    for (const auto& e : fs::recursive_directory_iterator(t, ec))
      if (e.path().extension() == ".sink") found.push_back(e.path().string());
    std::sort(found.begin(), found.end());
    files.insert(files.end(), found.begin(), found.end());
  }
  return files;
}

int compile_files(Compilation& c, const std::vector<std::string>& targets, const CommonOptions& common) {
  const std::vector<std::string> files = spec_files(targets);
  if (files.empty()) {
    fmt::print(stderr, "sinkc: no .sink files in '{}'\n", targets.empty() ? "" : targets.front());
    return 2;
  }
  for (const auto& f : files) {
    if (!c.add_file(f)) {
      fmt::print(stderr, "sinkc: cannot read '{}'\n", f);
      return 2;
    }
  }
  c.run();
  std::string text = c.diagnostics().render(common.color == 1);
  if (!text.empty()) std::cerr << text;
  return c.diagnostics().has_errors() ? 1 : 0;
}

int compile_file(Compilation& c, const std::string& file, const CommonOptions& common) {
  return compile_files(c, {file}, common);
}

namespace {

// Writes the checker's fixes into the files named (never an imported or standard-library file), each through a
// temporary file and a rename. Exit 2 where one cannot be written.
int write_fixes(const std::vector<std::string>& targets, const CommonOptions& common) {
  Compilation c(common.options());
  for (const auto& f : spec_files(targets))
    if (!c.add_file(f)) {
      fmt::print(stderr, "sinkc: cannot read '{}'\n", f);
      return 2;
    }
  c.run();
  for (const auto& path : spec_files(targets)) {
    const int id = c.program().sources.find(path);
    if (id < 0) continue;
    int applied = 0;
    const std::string& text = c.program().sources.file(id).text;
    const std::string fixed = apply_fixes(text, id, c.diagnostics().all(), &applied);
    if (applied == 0) continue;
    const std::string tmp = path + ".fix.tmp";
    std::ofstream(tmp, std::ios::binary | std::ios::trunc) << fixed;
    std::error_code ec;
    fs::rename(tmp, path, ec);
    if (ec) {
      fmt::print(stderr, "sinkc: cannot write {}: {}\n", path, ec.message());
      fs::remove(tmp, ec);
      return 2;
    }
    fmt::print("fixed {}: {} change{}\n", path, applied, applied == 1 ? "" : "s");
  }
  return 0;
}

}  // namespace

int check(const std::vector<std::string>& targets, const CommonOptions& common, bool fix) {
  if (fix)
    if (int rc = write_fixes(targets, common); rc != 0) return rc;
  Compilation c(common.options());
  if (int rc = compile_files(c, targets, common); rc != 0) return rc;
  const std::vector<std::string> files = spec_files(targets);
  fmt::print("ok: {} file{}, {} run{}\n", files.size(), files.size() == 1 ? "" : "s", c.plans().size(),
             c.plans().size() == 1 ? "" : "s");
  return 0;
}

int format(const std::vector<std::string>& targets, FormatMode mode) {
  int rc = 0;
  size_t changed = 0;
  for (const auto& file : spec_files(targets)) {
    std::ifstream in(file, std::ios::binary);
    if (!in) {
      fmt::print(stderr, "sinkc fmt: cannot read {}\n", file);
      rc = 2;
      continue;
    }
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::string errors;
    const std::optional<std::string> formatted = format_spec(file, text, errors);
    if (!formatted) {
      fmt::print(stderr, "{}", errors);
      rc = 2;
      continue;
    }
    if (mode == FormatMode::Print) {
      fmt::print("{}", *formatted);
      continue;
    }
    if (*formatted == text) continue;
    ++changed;
    if (mode == FormatMode::Check) {
      size_t line = 1;
      for (size_t i = 0; i < std::min(text.size(), formatted->size()) && text[i] == (*formatted)[i]; ++i)
        line += text[i] == '\n';
      fmt::print("{}:{}: not formatted (sinkc fmt --write {})\n", file, line, file);
      continue;
    }
    // Through a temporary file: an editor or a second sinkc never reads half of one.
    const std::string tmp = file + ".fmt.tmp";
    std::ofstream(tmp, std::ios::binary | std::ios::trunc) << *formatted;
    std::error_code ec;
    std::filesystem::rename(tmp, file, ec);
    if (ec) {
      fmt::print(stderr, "sinkc fmt: cannot write {}: {}\n", file, ec.message());
      rc = 2;
      continue;
    }
    fmt::print("formatted {}\n", file);
  }
  if (rc == 0 && mode == FormatMode::Check && changed > 0) rc = 1;
  return rc;
}

int plan(const std::string& file, const std::vector<std::string>& runs, const std::string& format,
         const CommonOptions& common) {
  Compilation c(common.options());
  if (int rc = compile_file(c, file, common); rc != 0) return rc;
  // Every pattern must name something before anything is printed.
  std::vector<std::string> names;
  for (const auto& p : c.plans()) names.push_back(p.name);
  if (auto error = results::unmatched_run_pattern(runs, names, file); !error.empty()) {
    fmt::print(stderr, "sinkc: {}\n", error);
    return 2;
  }
  for (const auto& p : c.plans()) {
    if (!results::wanted_run(p.name, runs)) continue;
    if (format == "json")
      fmt::print("{}\n", to_json(p));
    else
      fmt::print("{}\n", to_toml(p));
  }
  return 0;
}

bool select_plan_files(std::vector<std::string>& plan_files, const std::vector<std::string>& runs,
                       const std::string& where) {
  if (runs.empty()) return true;
  std::vector<std::string> names, selected;
  for (const auto& file : plan_files) {
    std::string name;
    try {
      name = read_plan(file).name;
    } catch (const PlanError& e) {
      fmt::print(stderr, "sinkc: {}\n", e.what());
      return false;
    }
    names.push_back(name);
    if (results::wanted_run(name, runs)) selected.push_back(file);
  }
  if (auto error = results::unmatched_run_pattern(runs, names, where); !error.empty()) {
    fmt::print(stderr, "sinkc: {}\n", error);
    return false;
  }
  plan_files = std::move(selected);
  return true;
}

int fields(const std::string& format, const CommonOptions& common) {
  // Defaults are what stdlib/defaults.sink says: an experiment that sets nothing, compiled.
  auto c = compile_defaults(common.options());
  if (c->diagnostics().has_errors()) {
    std::cerr << c->diagnostics().render(common.color == 1);
    return 1;
  }
  auto default_text = [&](const std::string& path) {
    const Value* v = default_of(*c, path);
    return v ? v->str() : std::string("(none)");
  };
  if (format == "markdown") {
    fmt::print(
        "# Fields of the sinklab language\n\nGenerated by `sinkc fields --format markdown` from the schema table "
        "(plan/schema.cpp); defaults from stdlib/defaults.sink.\n\n");
    fmt::print("| field | type | default | what it does |\n| --- | --- | --- | --- |\n");
    for (const auto& f : schema()) {
      std::string type = f.spec.describe();
      for (size_t pos = 0; (pos = type.find('|', pos)) != std::string::npos; pos += 2) type.replace(pos, 1, "\\|");
      fmt::print("| `{}` | {} | `{}` | {} |\n", f.path, type, default_text(f.path), f.doc);
    }
    return 0;
  }
  std::string block;
  for (const auto& f : schema()) {
    if (f.block() != block) fmt::print("{}{}\n", block.empty() ? "" : "\n", block = f.block());
    fmt::print("  {:<28} {}\n", f.path, f.spec.describe());
    fmt::print("  {:<28} default {}\n", "", default_text(f.path));
    fmt::print("  {:<28} {}\n", "", f.doc);
  }
  return 0;
}

int plans_for_runtime(const std::vector<std::string>& targets, const std::string& out, const CommonOptions& common,
                      std::vector<std::string>& plan_files) {
  std::vector<std::string> specs;
  std::error_code ec;
  for (const auto& t : targets) {
    if (!fs::exists(t, ec)) {
      fmt::print(stderr, "sinkc: '{}' does not exist\n", t);
      return 2;
    }
    if (fs::path(t).extension() == ".toml") {
      plan_files.push_back(t);
      continue;
    }
    if (!fs::is_directory(t, ec)) {
      specs.push_back(t);
      continue;
    }
    std::vector<std::string> found;
    for (const auto& e : fs::recursive_directory_iterator(t, ec))
      if (e.path().filename() == "plan.toml") found.push_back(e.path().string());
    std::sort(found.begin(), found.end());
    plan_files.insert(plan_files.end(), found.begin(), found.end());
    if (!spec_files({t}).empty())
      specs.push_back(t);
    else if (found.empty()) {
      fmt::print(stderr, "sinkc: no .sink files or plan.toml in '{}'\n", t);
      return 2;
    }
  }
  if (specs.empty()) return 0;
  Compilation c(common.options());
  if (int rc = compile_files(c, specs, common); rc != 0) return rc;
  const fs::path dir = fs::path(out) / ".plans";
  fs::create_directories(dir, ec);
  for (const auto& p : c.plans()) {
    // Content-named, so two processes write the same bytes: the rename is safe.
    const fs::path file = dir / (p.dir_name() + ".toml");
    const fs::path tmp = dir / fmt::format(".{}.{}.tmp", p.dir_name(), getpid());
    {
      std::ofstream f(tmp);
      f << to_toml(p);
      if (!f) {
        fmt::print(stderr, "sinkc: cannot write {}\n", tmp.string());
        return 2;
      }
    }
    fs::rename(tmp, file, ec);
    if (ec) {
      fmt::print(stderr, "sinkc: cannot write {}: {}\n", file.string(), ec.message());
      return 2;
    }
    plan_files.push_back(file.string());
  }
  return 0;
}

int compile(const std::string& file, const std::string& out, const CommonOptions& common) {
  Compilation c(common.options());
  if (int rc = compile_file(c, file, common); rc != 0) return rc;
  for (const auto& p : c.plans()) {
    fs::path dir = fs::path(out) / p.name;
    std::error_code ec;
    fs::create_directories(dir, ec);
    std::ofstream f(dir / "plan.toml");
    f << to_toml(p);
    // The kernel each backend would run: LLVM IR for the CPU JIT, CUDA C++ for a GPU.
    std::ofstream ll(dir / "attention.ll"), cu(dir / "attention.cu");
    ll << kernels::emit_llvm(kernels::kernel_spec(p));
    // attention.cu is what a GPU runs, and auto is bf16 on every GPU the tensor-core kernels target.
    const Precision asked = read_config(p).train.precision;
    const Precision precision = asked == Precision::auto_ ? Precision::bf16 : asked;
    cu << kernels::emit_cuda(kernels::kernel_spec(p), kernels::training_storage(precision));
    if (!f || !ll || !cu) {
      fmt::print(stderr, "sinkc: cannot write {}\n", (dir / "plan.toml").string());
      return 2;
    }
    fmt::print("{}  {}  {}\n", p.hash8(), (dir / "plan.toml").string(), (dir / "attention.ll").string());
  }
  return 0;
}

}  // namespace sink::cli
