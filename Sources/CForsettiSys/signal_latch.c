#include "forsetti_signal_latch.h"

#include <signal.h>
#include <string.h>

/* sig_atomic_t is what a handler may write; 65 covers every Linux signal number. */
static volatile sig_atomic_t latched[65];

static void latch(int sig) {
    if (sig > 0 && sig < 65) latched[sig] = 1;
}

int forsetti_signal_latch(int sig) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = latch;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    return sigaction(sig, &sa, NULL);
}

int forsetti_signal_latched(int sig) { return sig > 0 && sig < 65 ? latched[sig] : 0; }
