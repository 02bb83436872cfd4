#include "runtime/attention/jit.h"

#include <cstdlib>
#include <filesystem>
#include <fmt/format.h>
#include <map>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <unistd.h>

#include <llvm/ExecutionEngine/ObjectCache.h>
#include <llvm/ExecutionEngine/Orc/CompileUtils.h>
#include <llvm/ExecutionEngine/Orc/ExecutionUtils.h>
#include <llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/ExecutionEngine/Orc/ThreadSafeModule.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/IRReader/IRReader.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/SourceMgr.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>

#include "support/installation.h"

namespace sink::rt {
namespace fs = std::filesystem;
namespace orc = llvm::orc;

namespace {

std::string message(llvm::Error e) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << e;
  return os.str();
}

// Object files on disk, named by the module identifier (kernel hash + CPU).
class DiskCache : public llvm::ObjectCache {
 public:
  explicit DiskCache(std::string dir) : dir_(std::move(dir)) {}
  void notifyObjectCompiled(const llvm::Module* m, llvm::MemoryBufferRef obj) override {
    if (dir_.empty()) return;
    std::error_code ec;
    fs::create_directories(dir_, ec);
    // Unique per process and thread: parallel runs (--jobs) may compile the
    // same kernel at once; each renames a whole file, and either one wins.
    std::string path = file(m), tmp = fmt::format("{}.{}.{}.tmp", path, getpid(),
                                                  std::hash<std::thread::id>()(std::this_thread::get_id()));
    llvm::raw_fd_ostream out(tmp, ec);
    if (ec) return;
    out << obj.getBuffer();
    out.close();
    if (out.has_error()) {
      out.clear_error();
      fs::remove(tmp, ec);
      return;  // no cached object: the next process compiles it again
    }
    fs::rename(tmp, path, ec);
  }
  std::unique_ptr<llvm::MemoryBuffer> getObject(const llvm::Module* m) override {
    if (dir_.empty()) return nullptr;
    auto buf = llvm::MemoryBuffer::getFile(file(m));
    return buf ? std::move(*buf) : nullptr;
  }
  bool has(const std::string& id) const { return !dir_.empty() && fs::exists(dir_ + "/" + id + ".o"); }

 private:
  std::string file(const llvm::Module* m) const { return dir_ + "/" + m->getModuleIdentifier() + ".o"; }
  std::string dir_;
};

}  // namespace

struct Jit::State {
  std::unique_ptr<DiskCache> cache;
  std::unique_ptr<orc::LLJIT> jit;
  std::unique_ptr<llvm::TargetMachine> tm;  // for the optimization pipeline's cost model
  std::map<std::string, orc::JITDylib*> loaded;
  std::string cpu;
  int compiled = 0;
  std::mutex mutex;
};

Jit::Jit(std::string cache_dir) : state_(std::make_unique<State>()) {
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  llvm::InitializeNativeTargetAsmParser();
  auto jtmb = orc::JITTargetMachineBuilder::detectHost();
  if (!jtmb) throw std::runtime_error("JIT: " + message(jtmb.takeError()));
  jtmb->setCodeGenOptLevel(llvm::CodeGenOptLevel::Aggressive);
  state_->cpu = jtmb->getCPU();
  auto tm = jtmb->createTargetMachine();
  if (!tm) throw std::runtime_error("JIT: " + message(tm.takeError()));
  state_->tm = std::move(*tm);
  state_->cache = std::make_unique<DiskCache>(std::move(cache_dir));
  DiskCache* cache = state_->cache.get();
  auto jit = orc::LLJITBuilder()
                 .setJITTargetMachineBuilder(*jtmb)
                 .setCompileFunctionCreator([cache](orc::JITTargetMachineBuilder b)
                                                -> llvm::Expected<std::unique_ptr<orc::IRCompileLayer::IRCompiler>> {
                   return std::make_unique<orc::ConcurrentIRCompiler>(std::move(b), cache);
                 })
                 .create();
  if (!jit) throw std::runtime_error("JIT: " + message(jit.takeError()));
  state_->jit = std::move(*jit);
}

Jit::~Jit() = default;

int Jit::compiled() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->compiled;
}
std::string Jit::cpu() const { return state_->cpu; }

void* Jit::lookup(const std::string& key, const std::string& ir, const std::string& symbol) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  auto& jit = *state_->jit;
  orc::JITDylib* dylib = nullptr;
  if (auto it = state_->loaded.find(key); it != state_->loaded.end()) {
    dylib = it->second;
  } else {
    auto ctx = std::make_unique<llvm::LLVMContext>();
    llvm::SMDiagnostic err;
    auto module = llvm::parseIR(llvm::MemoryBufferRef(ir, key), err, *ctx);
    if (!module) {
      std::string s;
      llvm::raw_string_ostream os(s);
      err.print("kernel", os);
      throw std::runtime_error("JIT: cannot parse kernel IR: " + os.str());
    }
    const std::string id = key + "-" + state_->cpu;
    module->setModuleIdentifier(id);
    module->setDataLayout(jit.getDataLayout());
    module->setTargetTriple(jit.getTargetTriple().str());
    for (auto& f : *module) {
      if (f.isDeclaration()) continue;
      f.addFnAttr("target-cpu", state_->cpu);
      f.addFnAttr("target-features", state_->tm->getTargetFeatureString());
    }
    if (!state_->cache->has(id)) {
      // LLVM's O3 pipeline, tuned for this CPU (vector width from the target).
      llvm::LoopAnalysisManager lam;
      llvm::FunctionAnalysisManager fam;
      llvm::CGSCCAnalysisManager cgam;
      llvm::ModuleAnalysisManager mam;
      llvm::PassBuilder pb(state_->tm.get());
      pb.registerModuleAnalyses(mam);
      pb.registerCGSCCAnalyses(cgam);
      pb.registerFunctionAnalyses(fam);
      pb.registerLoopAnalyses(lam);
      pb.crossRegisterProxies(lam, fam, cgam, mam);
      pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3).run(*module, mam);
      ++state_->compiled;
    }
    auto created = jit.createJITDylib("kernel-" + key);
    if (!created) throw std::runtime_error("JIT: " + message(created.takeError()));
    dylib = &*created;
    // tanhf, log1pf, expf...: from the process (libm).
    auto libm = orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(jit.getDataLayout().getGlobalPrefix());
    if (!libm) throw std::runtime_error("JIT: " + message(libm.takeError()));
    dylib->addGenerator(std::move(*libm));
    if (auto e = jit.addIRModule(*dylib, orc::ThreadSafeModule(std::move(module), std::move(ctx))))
      throw std::runtime_error("JIT: " + message(std::move(e)));
    state_->loaded[key] = dylib;
  }
  auto address = jit.lookup(*dylib, symbol);
  if (!address) throw std::runtime_error("JIT: " + message(address.takeError()));
  return address->toPtr<void*>();
}

Jit& Jit::shared() {
  static Jit instance(kernel_cache_dir().string());
  return instance;
}

}  // namespace sink::rt
