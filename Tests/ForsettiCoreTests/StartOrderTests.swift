import ForsettiCore
import Testing

/// Start levels: a level holds modules that depend only on earlier levels, so isolated modules
/// of one level may start at once; within a level, module-ID order.
@Suite struct StartOrderTests {
  static func service(_ id: String, role: DefaultModuleRole? = nil, needs: [DefaultModuleRole] = [])
    -> ModuleManifest
  {
    ManifestModel.make(
      id, type: .service, template: "1.1", capabilities: role?.requiredCapability.map { [$0] } ?? [],
      role: role,
      requirements: needs.isEmpty
        ? nil
        : RuntimeRequirements(
          io: [], dataIsolation: DataIsolation(mode: .privateToModule, requiredDefaultRoles: needs)))
  }

  static func ids(_ levels: [[ModuleManifest]]) -> [[String]] { levels.map { $0.map(\.moduleID) } }

  @Test func independentModulesFormOneLevelInIDOrder() {
    let levels = StartOrder.levels([Self.service("c.c"), Self.service("a.a"), Self.service("b.b")])
    #expect(Self.ids(levels) == [["a.a", "b.b", "c.c"]])
  }

  @Test func providersComeALevelBeforeTheirConsumers() {
    let levels = StartOrder.levels([
      Self.service("a.consumer", needs: [.authentication]),
      Self.service("z.auth", role: .authentication),
      Self.service("m.free"),
      Self.service("b.consumer", needs: [.authentication, .security]),
      Self.service("y.security", role: .security),
    ])
    #expect(Self.ids(levels) == [["m.free", "y.security", "z.auth"], ["a.consumer", "b.consumer"]])
  }

  @Test func levelsAgreeWithTheSequentialOrder() throws {
    let all = [
      Self.service("a.consumer", needs: [.authentication]), Self.service("z.auth", role: .authentication),
      Self.service("m.free"),
    ]
    let flat = StartOrder.levels(all).flatMap { $0.map(\.moduleID) }
    let order = StartOrder.order(all).map(\.moduleID)
    // Every provider before its consumer in both; the levels keep ID order within a level.
    for sequence in [flat, order] {
      let provider = try #require(sequence.firstIndex(of: "z.auth"))
      let consumer = try #require(sequence.firstIndex(of: "a.consumer"))
      #expect(provider < consumer, "\(sequence)")
    }
    #expect(Set(flat) == Set(order))
  }
}
