#include "cli/torchrun.h"

#include "support/shell.h"

#include <arpa/inet.h>
#include <cstdio>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace sink::cli {

namespace {

// The Python whose torch the runtime was built with, as the runtime says (`--torch-python`): a front end built
// apart from it (the portable sinkc) knows nothing of it.
std::string torch_python_of(const std::string& runtime) {
  std::string out = command_output(shell_quote(runtime) + " --torch-python 2>/dev/null");
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out;
}

}  // namespace

// The torchrun of the PyTorch the runtime was built with (its store and the
// runtime's c10d client must be one version), else the one on PATH.
std::vector<std::string> torchrun_argv(int workers, const std::string& port, const std::string& runtime) {
  std::vector<std::string> argv;
  const std::string torch_python = torch_python_of(runtime);
  if (!torch_python.empty() && access(torch_python.c_str(), X_OK) == 0)
    argv = {torch_python, "-m", "torch.distributed.run"};
  else
    argv = {"torchrun"};
  // --redirects/--tee: Debian's torchrun (torch 1.13) dies at start without
  // them, and knows only the underscore spellings, which PyTorch 2.x still accepts.
  argv.insert(argv.end(), {"--nnodes", "1", "--nproc_per_node", std::to_string(workers), "--master_addr", "127.0.0.1",
                           "--master_port", port, "--no_python", "--redirects", "1", "--tee", "1", runtime, "run"});
  return argv;
}

int free_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  const bool ok = fd >= 0 && bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
                  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  if (fd >= 0) close(fd);
  return ok ? ntohs(addr.sin_port) : 29500;
}

}  // namespace sink::cli
