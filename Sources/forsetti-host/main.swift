import ForsettiCLI
import Foundation

exit(ForsettiHostCLI.main(Array(CommandLine.arguments.dropFirst())))
