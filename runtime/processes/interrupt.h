// Ctrl-C, SIGTERM and SIGUSR1 during `sinkc run`: the run in progress
// finishes its step (a data-parallel run: the next logged step, where its
// workers agree to stop), writes a checkpoint and a summary with status
// "interrupted" (continue it with --resume), and the sweep stops. A second
// Ctrl-C or SIGTERM ends the process; SIGUSR1 (the warning `sinkc submit
// --slurm` asks Slurm for before the time limit) never does.
#pragma once

namespace sink::rt {

void install_interrupt_handlers();
bool interrupt_requested();
void request_interrupt();  // as if a signal came (tests)
void clear_interrupt();

}  // namespace sink::rt
