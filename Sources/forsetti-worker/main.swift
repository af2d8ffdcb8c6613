import ForsettiBridge
import Glibc

// Kept minimal on purpose: confinement must happen before anything starts a thread.
if CommandLine.arguments.count == 2, CommandLine.arguments[1] == "--zygote" { ZygoteMain.run() }
exit(WorkerMain.run(Array(CommandLine.arguments.dropFirst())))
