#include "compiler/resolve.h"

#include <algorithm>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

#include "compiler/parse.h"

namespace sink {
namespace fs = std::filesystem;

namespace {

std::string canonical(const fs::path& p) {
  std::error_code ec;
  fs::path c = fs::weakly_canonical(p, ec);
  return ec ? p.lexically_normal().string() : c.string();
}

std::optional<std::string> read_file(const fs::path& p) {
  std::error_code ec;
  if (!fs::is_regular_file(p, ec)) return std::nullopt;
  std::ifstream in(p, std::ios::binary);
  if (!in) return std::nullopt;
  // Read at most one byte past the limit (the parser then refuses the file
  // and reports its size), in chunks: neither a zeroed 1 MB buffer per file
  // nor a copy the size of a huge file.
  std::string text;
  char chunk[1 << 16];
  while (text.size() <= kMaxSpecBytes) {
    in.read(chunk, sizeof chunk);
    if (in.gcount() <= 0) break;
    text.append(chunk, static_cast<size_t>(in.gcount()));
  }
  if (text.size() > kMaxSpecBytes) text.resize(kMaxSpecBytes + 1);
  return text;
}

class Loader {
 public:
  Loader(Program& program, Diagnostics& diags) : p_(program), diags_(diags) {}

  // Returns the module index; -1 if the file cannot be read.
  int load(const std::string& path, const std::string& shown) {
    std::string key = canonical(path);
    if (auto it = p_.loaded_paths.find(key); it != p_.loaded_paths.end()) {
      for (size_t k = 0; k < stack_.size(); ++k) {
        if (stack_[k] != key) continue;
        std::string cycle;
        for (size_t m = k; m < stack_.size(); ++m) cycle += fs::path(stack_[m]).filename().string() + " -> ";
        cycle_ = cycle + fs::path(key).filename().string();
        return -2;
      }
      return it->second;
    }
    auto text = read_file(path);
    if (!text) return -1;
    int file = p_.sources.add(shown, std::move(*text));
    return add_module(key, file);
  }

  int add_text(const std::string& name, std::string text) {
    int file = p_.sources.add(name, std::move(text));
    return add_module(name, file);
  }

  std::string take_cycle() { return std::exchange(cycle_, ""); }

 private:
  int add_module(const std::string& key, int file) {
    ast::Module m = p_.modules.size() < 2 ? parse_prelude_once(file) : parse_module(file, p_.sources, diags_);
    int index = static_cast<int>(p_.modules.size());
    p_.loaded_paths[key] = index;
    p_.modules.push_back(std::move(m));
    stack_.push_back(key);
    // Copy: loading imports appends to p_.modules and invalidates references.
    std::vector<ast::Import> imports = p_.modules[index].imports;
    fs::path dir = fs::path(p_.sources.file(file).path).parent_path();
    for (const auto& imp : imports) import(imp, dir);
    stack_.pop_back();
    return index;
  }

  void import(const ast::Import& imp, const fs::path& dir) {
    std::vector<fs::path> candidates = {dir / imp.path};
    if (!p_.options.stdlib_dir.empty()) {
      fs::path lib(p_.options.stdlib_dir);
      candidates.push_back(lib / imp.path);
      candidates.push_back(lib.parent_path() / imp.path);  // `import "stdlib/presets.sink"` from anywhere
    }
    for (const auto& c : candidates) {
      std::error_code ec;
      if (!fs::is_regular_file(c, ec)) continue;
      int r = load(c.string(), c.lexically_normal().string());
      if (r == -2)
        diags_.error(imp.span, "import cycle: " + take_cycle());
      else if (r == -1)
        diags_.error(imp.span, fmt::format("cannot read imported file '{}'", c.string()));
      return;
    }
    diags_.error(imp.span, fmt::format("unknown import \"{}\"", imp.path),
                 fmt::format("looked in {} and the stdlib folder", dir.empty() ? "." : dir.string()));
  }

  // The stdlib's two files are loaded first, so they get the same file ids
  // in every compilation of a process: their syntax trees can be reused.
  // sinkc parses them once anyway; the front-end tests and the fuzzer
  // compile thousands of inputs against them, and parsing them took most of
  // each input's time there. Only a parse without diagnostics is kept, keyed
  // by the file's path and text, so an edited stdlib is parsed again.
  ast::Module parse_prelude_once(int file) {
    static std::mutex mutex;
    static std::map<std::pair<std::string, std::string>, ast::Module> parsed;
    const SourceFile& source = p_.sources.file(file);
    auto key = std::make_pair(source.path, source.text);
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (auto it = parsed.find(key); it != parsed.end() && it->second.file == file) return it->second;
    }
    const size_t before = diags_.all().size();
    ast::Module m = parse_module(file, p_.sources, diags_);
    if (diags_.all().size() == before) {
      std::lock_guard<std::mutex> lock(mutex);
      parsed.insert_or_assign(std::move(key), m);
    }
    return m;
  }

  Program& p_;
  Diagnostics& diags_;
  std::vector<std::string> stack_;
  std::string cycle_;
};

void load_prelude(Program& program, Loader& loader, Diagnostics& diags) {
  if (!program.modules.empty()) return;
  for (const char* name : {"defaults.sink", "presets.sink"}) {
    fs::path p = fs::path(program.options.stdlib_dir) / name;
    if (loader.load(p.string(), p.lexically_normal().string()) < 0)
      diags.error({}, fmt::format("cannot read the standard library file '{}' (set SINKLAB_HOME to the folder "
                                  "holding stdlib/, or SINKLAB_STDLIB to stdlib/ itself)",
                                  p.string()));
  }
  program.prelude_modules = static_cast<int>(program.modules.size());
  for (int m = 0; m < program.prelude_modules; ++m)
    for (const auto& x : program.modules[m].experiments)
      if (x.name != "defaults") program.preset_names.insert(x.name);
}

}  // namespace

static Loader loader_for(Program& program, Diagnostics& diags) {
  Loader loader(program, diags);
  load_prelude(program, loader, diags);
  return loader;
}

bool load_root(Program& program, const std::string& path, Diagnostics& diags) {
  Loader loader = loader_for(program, diags);
  int m = loader.load(path, path);
  if (m < 0) return false;
  program.root_modules.push_back(m);
  return true;
}

void load_root_text(Program& program, const std::string& name, std::string text, Diagnostics& diags) {
  Loader loader = loader_for(program, diags);
  program.root_modules.push_back(loader.add_text(name, std::move(text)));
}

void resolve(Program& program, Diagnostics& diags) {
  // Names are global across the loaded modules: a run name must be unambiguous.
  for (int m = 0; m < static_cast<int>(program.modules.size()); ++m) {
    const auto& xs = program.modules[m].experiments;
    for (int i = 0; i < static_cast<int>(xs.size()); ++i) {
      const auto& x = xs[i];
      if (x.name.empty()) continue;
      auto [it, fresh] = program.experiments.emplace(x.name, ExperimentRef{m, i});
      // The installed stdlib is a fallback: a name a spec's own files define
      // (a project's copy of presets.sink, say) replaces it.
      if (!fresh && it->second.module < program.prelude_modules && m >= program.prelude_modules) {
        it->second = ExperimentRef{m, i};
        continue;
      }
      if (!fresh) {
        const auto& first = program.experiment(it->second);
        const auto& f = program.sources.file(first.name_span.file);
        diags.error(x.name_span, fmt::format("duplicate experiment name '{}'", x.name),
                    fmt::format("first defined at {}:{}:{}", f.path, first.name_span.line, first.name_span.col));
      }
    }
  }

  std::vector<std::string> names;
  for (const auto& [n, _] : program.experiments) names.push_back(n);

  // --base: the first stdlib preset in a chain is swapped for this one.
  ExperimentRef base_override;
  if (!program.options.base.empty()) {
    auto it = program.experiments.find(program.options.base);
    if (it == program.experiments.end() || program.experiment(it->second).is_sweep) {
      std::string guess = closest(program.options.base, names);
      diags.error({}, fmt::format("--base: unknown preset '{}'", program.options.base),
                  did_you_mean(program.options.base, guess));
    } else {
      base_override = it->second;
    }
  }
  auto is_preset = [&](ExperimentRef r) { return program.preset_names.count(program.experiment(r).name) > 0; };

  for (const auto& [name, ref] : program.experiments) {
    std::vector<ExperimentRef> chain;
    ExperimentRef cur = ref;
    bool ok = true;
    while (cur.valid()) {
      for (auto seen : chain) {
        if (seen.module == cur.module && seen.index == cur.index) {
          const auto& x = program.experiment(ref);
          std::string path;
          for (auto c : chain) path += program.experiment(c).name + " -> ";
          diags.error(x.base_span.valid() ? x.base_span : x.name_span,
                      fmt::format("'extends' cycle: {}{}", path, program.experiment(cur).name));
          ok = false;
          break;
        }
      }
      if (!ok) break;
      chain.push_back(cur);
      const auto& x = program.experiment(cur);
      std::string base = x.base;
      if (base.empty()) base = x.name == "defaults" ? "" : "defaults";
      if (base.empty()) break;
      auto it = program.experiments.find(base);
      if (it == program.experiments.end()) {
        if (cur.module == ref.module && cur.index == ref.index) {
          std::string guess = closest(base, names);
          diags.error(x.base_span, fmt::format("unknown preset or experiment '{}'", base), did_you_mean(base, guess));
        }
        ok = false;
        break;
      }
      cur = it->second;
    }
    if (!ok) continue;
    std::reverse(chain.begin(), chain.end());
    program.chains[name] = chain;
  }

  if (!base_override.valid() || !program.chains.count(program.options.base)) return;
  // Every chain becomes: the new preset's chain, then what came after the
  // last preset of the old chain.
  const std::vector<ExperimentRef> base_chain = program.chains[program.options.base];
  for (auto& [name, chain] : program.chains) {
    if (name == program.options.base || is_preset(chain.back()) || program.experiment(chain.back()).name == "defaults")
      continue;
    size_t after = 1;  // skip `defaults`
    for (size_t k = 0; k < chain.size(); ++k)
      if (is_preset(chain[k])) after = k + 1;
    std::vector<ExperimentRef> swapped = base_chain;
    swapped.insert(swapped.end(), chain.begin() + static_cast<long>(after), chain.end());
    chain = swapped;
  }
}

}  // namespace sink
