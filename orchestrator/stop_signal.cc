#include "orchestrator/stop_signal.h"

#include <signal.h>

#include <atomic>

namespace lockstep::orchestrator {
namespace {

std::atomic<bool> stop_requested{false};
std::atomic<int> stop_signal{0};
static_assert(std::atomic<bool>::is_always_lock_free && std::atomic<int>::is_always_lock_free,
              "the flag is set from a signal handler");

void OnStopSignal(int signal_number) {
  stop_signal.store(signal_number);
  stop_requested.store(true);
}

void Install(int signal_number) {
  struct sigaction action = {};
  action.sa_handler = OnStopSignal;
  sigemptyset(&action.sa_mask);
  // SA_RESETHAND: the handler runs once; a second signal takes the default action.
  action.sa_flags = SA_RESTART | SA_RESETHAND;
  sigaction(signal_number, &action, nullptr);
}

}  // namespace

void InstallStopSignalHandlers() {
  Install(SIGINT);
  Install(SIGTERM);
}

bool StopRequested() { return stop_requested.load(); }

int StopSignalNumber() { return stop_signal.load(); }

void RequestStop() { stop_requested.store(true); }

void ResetStopRequest() {
  stop_requested.store(false);
  stop_signal.store(0);
  InstallStopSignalHandlers();
}

}  // namespace lockstep::orchestrator
