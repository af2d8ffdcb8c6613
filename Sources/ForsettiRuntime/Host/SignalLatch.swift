import CForsettiSys

/// Keeps a signal that comes before Dispatch's own handler for a signal source is in place.
///
/// Dispatch installs its handler when the source is registered, on its own thread, some time
/// after `resume`; a signal ignored (SIG_IGN) or left at its default meanwhile is lost or kills
/// the process. The latch is a handler that only remembers the signal came.
package enum SignalLatch {
  /// Installs the latch as `signal`'s handler.
  package static func install(_ signal: Int32) { _ = forsetti_signal_latch(signal) }

  /// Whether `signal` came while the latch was its handler.
  package static func caught(_ signal: Int32) -> Bool { forsetti_signal_latched(signal) != 0 }
}
