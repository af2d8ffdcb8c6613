/// Baselines for `scripts/bench`, made with the same machinery the host uses.
public enum BenchmarkProbes {
  /// A libffi closure of the shape `int32_t (*)(int64_t)` that does nothing: the floor under a
  /// bound host function of that shape (`forsetti_events.unsubscribe`).
  public static func bareClosure() -> UnsafeRawPointer? {
    guard
      let c = try? FFIClosure(arguments: [FFIType.int64], returns: FFIType.int32, handler: { _ in .int32(0) })
    else {
      return nil
    }
    return UnsafeRawPointer(c.code)
  }
}
