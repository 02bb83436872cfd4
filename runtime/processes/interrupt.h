// Ctrl-C and SIGTERM during `sinkc run`: the run in progress finishes its
// step, writes a checkpoint and a summary with status "interrupted" (continue
// it with --resume), and the sweep stops. A second signal ends the process.
#pragma once

namespace sink::rt {

void install_interrupt_handlers();
bool interrupt_requested();
void request_interrupt();  // as if a signal came (tests)
void clear_interrupt();

}  // namespace sink::rt
