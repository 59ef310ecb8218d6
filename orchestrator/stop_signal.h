// Ctrl-C for the orchestrator: SIGINT / SIGTERM set a flag that the RL loop polls between
// steps (it then checkpoints, stops its children and exits). A second signal of the same kind
// takes the default action at once (the children follow through PR_SET_PDEATHSIG).
//
// Thread safety: the functions may be called from any thread; the flag is a lock-free atomic.
#ifndef LOCKSTEP_ORCHESTRATOR_STOP_SIGNAL_H_
#define LOCKSTEP_ORCHESTRATOR_STOP_SIGNAL_H_

namespace lockstep::orchestrator {

// Installs the SIGINT and SIGTERM handlers (idempotent).
void InstallStopSignalHandlers();

// True once SIGINT or SIGTERM has arrived (or RequestStop was called).
bool StopRequested();

// The signal that requested the stop (0 when none, or RequestStop).
int StopSignalNumber();

// Sets the flag as a signal would (for tests and for errors that should stop the loop).
void RequestStop();

// Clears the flag and re-arms the handlers (for tests).
void ResetStopRequest();

}  // namespace lockstep::orchestrator

#endif  // LOCKSTEP_ORCHESTRATOR_STOP_SIGNAL_H_
