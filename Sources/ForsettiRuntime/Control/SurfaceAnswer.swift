import ForsettiCore

/// The `surface` answer: the UI surface the host published (`surface.json`), and whether that
/// host still runs.
enum SurfaceAnswer {
  static func answer(stateDirectory: String) throws(ControlFailure) -> JSONValue {
    let value: JSONValue?
    do {
      value = try Judge.readJSON(
        RuntimeStateFile.surfacePath(stateDirectory), setting: "state", missingOK: true)
    } catch { throw .judging(error) }
    guard let value, case .object(var o) = value else {
      return .object(JSONObject([("running", false), ("surface", .null)]))
    }
    let pid = o["pid"]?.integerValue.flatMap(Int32.init(exactly:)) ?? 0
    o["running"] = .bool(RuntimeStateFile.isAlive(pid))
    return .object(o)
  }
}
