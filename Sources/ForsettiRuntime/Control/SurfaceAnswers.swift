import ForsettiCore

/// The `surface` answer: the UI surface the host published (`surface.json`), and whether that
/// host still runs.
enum SurfaceAnswers {
  static func answer(stateDirectory: String) throws(ControlFailure) -> SurfaceAnswer {
    let value: JSONValue?
    do {
      value = try Judge.readJSON(
        RuntimeStateFile.surfacePath(stateDirectory), setting: "state", missingOK: true)
    } catch { throw .judging(error) }
    guard let value, case .object(let o) = value else { return SurfaceAnswer(running: false, published: nil) }
    let published: SurfaceAnswer.Published?
    do { published = try SurfaceAnswer.published(o) } catch {
      let path = RuntimeStateFile.surfacePath(stateDirectory)
      throw ControlFailure(.failed, "\(path): \(error)", field: .stateDirectory, value: path)
    }
    return SurfaceAnswer(
      running: published.map { RuntimeStateFile.isAlive($0.pid) } ?? false, published: published)
  }
}
