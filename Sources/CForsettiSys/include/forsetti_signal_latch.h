#ifndef FORSETTI_SIGNAL_LATCH_H
#define FORSETTI_SIGNAL_LATCH_H

/// A handler that only remembers that `sig` came: installed until Dispatch's own handler for a
/// signal source replaces it (asynchronously), so a signal in between is kept, not lost. 0 or
/// -1 with errno.
int forsetti_signal_latch(int sig);
/// Whether `sig` came while the latch was installed.
int forsetti_signal_latched(int sig);

#endif
