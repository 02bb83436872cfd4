#include "runtime/processes/interrupt.h"

#include <atomic>
#include <csignal>

namespace sink::rt {
namespace {

std::atomic<bool> requested{false};

extern "C" void on_signal(int sig) {
  requested.store(true);
  std::signal(sig, SIG_DFL);  // the second one is not caught
}

// SIGUSR1 asks for a checkpoint, never for the process's end: a Slurm warning
// can reach the runtime both directly and through the batch script that
// forwards it, and the second copy must not kill a run mid-checkpoint.
extern "C" void on_checkpoint_signal(int) { requested.store(true); }

}  // namespace

void install_interrupt_handlers() {
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  struct sigaction checkpoint{};
  checkpoint.sa_handler = on_checkpoint_signal;
  sigemptyset(&checkpoint.sa_mask);
  checkpoint.sa_flags = SA_RESTART;
  sigaction(SIGUSR1, &checkpoint, nullptr);
}

bool interrupt_requested() { return requested.load(); }
void request_interrupt() { requested.store(true); }
void clear_interrupt() { requested.store(false); }

}  // namespace sink::rt
