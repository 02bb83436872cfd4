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

}  // namespace

void install_interrupt_handlers() {
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
}

bool interrupt_requested() { return requested.load(); }
void request_interrupt() { requested.store(true); }
void clear_interrupt() { requested.store(false); }

}  // namespace sink::rt
