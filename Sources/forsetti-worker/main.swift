import ForsettiBridge
import Glibc

// Kept minimal on purpose: confinement must happen before anything starts a thread.
exit(WorkerMain.run(Array(CommandLine.arguments.dropFirst())))
