import ForsettiCLI
import Glibc

exit(ForsettiHostCLI.main(Array(CommandLine.arguments.dropFirst())))
