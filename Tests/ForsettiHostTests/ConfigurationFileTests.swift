import ForsettiHost
import ForsettiTestSupport
import Foundation
import Testing

/// `ForsettiHost.Configuration(file:)`: host.conf read by the facade, with the keys `run` takes
/// and the same ranges, every bad line said at once by its line and field.
@Suite struct ConfigurationFileTests {
  let dir = TemporaryDirectory("configuration-file")

  @Test func aFileGivesTheConfigurationItDescribes() throws {
    let path = try dir.write(
      "host.conf",
      """
      # an application's host
      manifests = /srv/app/manifests
      plugins = /srv/app/plugins
      plugins = /srv/app/more-plugins
      state = /var/lib/app
      approve-all = true
      memory-limit = 512
      cpu-weight = 200
      cpu-weight = com.example.notes=300
      max-restarts = 0
      log-rate = 50
      application-id = com.example.editor
      policy = fixed:storage,api
      """)
    let c = try ForsettiHost.Configuration(file: path)
    #expect(c.judging.manifestsDirectory == "/srv/app/manifests")
    #expect(c.judging.pluginDirectories == ["/srv/app/plugins", "/srv/app/more-plugins"])
    #expect(c.judging.stateDirectory == "/var/lib/app")
    #expect(c.judging.approveAll)
    #expect(c.isolation?.limits.memoryBytes == 512 << 20)
    #expect(c.isolation?.cpu.defaultWeight == 200 && c.isolation?.cpu.weights["com.example.notes"] == 300)
    #expect(c.isolation?.maxRestarts == 0)
    #expect(c.logLimits.linesPerSecond == 50)
    #expect(c.applicationID == "com.example.editor")
    #expect(c.judging.policy.allows(moduleID: "com.x", capability: .storage))
    #expect(!c.judging.policy.allows(moduleID: "com.x", capability: .networking))
  }

  @Test func theFileThePackageShipsReadsAsItsModuleDirectories() throws {
    let c = try ForsettiHost.Configuration(file: ExampleModules.root("docs/host.conf"))
    #expect(c.judging.manifestsDirectory == "/usr/local/lib/forsetti/manifests")
    #expect(c.judging.pluginDirectories == ["/usr/local/lib/forsetti/plugins"])
  }

  @Test func everyBadLineIsSaidByItsLineAndField() throws {
    let path = try dir.write(
      "bad.conf",
      """
      manifests = /srv/app/manifests
      max-restarts = 5000
      memory-limt = 64
      approve-all = yes
      log-files = 0
      host-version = one
      """)
    do {
      _ = try ForsettiHost.Configuration(file: path)
      Issue.record("a file with bad lines was accepted")
    } catch {
      let text = error.description
      for expected in [
        "bad.conf:3: unknown option 'memory-limt'; did you mean 'memory-limit'?",
        "bad.conf:4: 'approve-all' is a flag: its value is true or false, not 'yes'",
      ] {
        #expect(text.contains(expected), "missing \(expected) in:\n\(text)")
      }
      // Syntax first: a file whose lines cannot all be read is not applied at all.
      #expect(!text.contains("isolation.maxRestarts"), "\(text)")
    }
    let ranges = try dir.write("ranges.conf", "max-restarts = 5000\nlog-files = 0\nhost-version = one\n")
    do {
      _ = try ForsettiHost.Configuration(file: ranges)
      Issue.record("settings out of range were accepted")
    } catch {
      #expect(
        error.description.contains(
          "ranges.conf:1: invalid value '5000' for 'max-restarts': isolation.maxRestarts"),
        "\(error)")
      #expect(
        error.description.contains("ranges.conf:2: invalid value '0' for 'log-files': logLimits.keptFiles"),
        "\(error)")
      #expect(
        error.description.contains(
          "ranges.conf:3: invalid value 'one' for 'host-version': judging.hostVersion: expected a version X.Y.Z"
        ),
        "\(error)")
    }
  }
}
