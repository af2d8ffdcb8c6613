import Glibc

/// A source of monotonic time, so that rate limits and rotation checks can be tested without
/// sleeping.
package protocol RateClock: Sendable {
  /// Nanoseconds since an arbitrary fixed point; never decreases.
  func nanoseconds() -> UInt64
}

/// CLOCK_MONOTONIC: unaffected by setting the wall clock (which a module must not be able to
/// use to refill its own bucket).
package struct MonotonicClock: RateClock {
  package init() {}

  package func nanoseconds() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(clamping: ts.tv_sec) &* 1_000_000_000 &+ UInt64(clamping: ts.tv_nsec)
  }
}

/// A token bucket: holds at most `burst` tokens, refills at `perSecond` tokens a second, and
/// admits a cost only when that many tokens are there. Doubles, so no input can overflow it.
package struct TokenBucket: Sendable, Hashable {
  package let burst: Double
  package let perSecond: Double
  private(set) var tokens: Double
  private var refilledAt: UInt64

  /// A full bucket at time `now`.
  package init(burst: Int, perSecond: Int, now: UInt64) {
    self.burst = Double(max(1, burst))
    self.perSecond = Double(max(1, perSecond))
    tokens = self.burst
    refilledAt = now
  }

  /// Takes `cost` tokens and returns true, or takes nothing and returns false.
  package mutating func take(_ cost: Int, now: UInt64) -> Bool {
    if now > refilledAt {
      let seconds = Double(now - refilledAt) / 1e9
      tokens = min(burst, tokens + seconds * perSecond)
      refilledAt = now
    }
    // A line dearer than the whole bucket would otherwise never pass.
    let c = min(burst, Double(max(0, cost)))
    guard tokens >= c else { return false }
    tokens -= c
    return true
  }

  /// Takes `cost` more tokens for something already admitted, going into debt (at most a
  /// burst's worth) that later refills repay: for a line whose size is known only once made.
  package mutating func charge(_ cost: Int) {
    tokens = max(-burst, tokens - min(burst, Double(max(0, cost))))
  }

  /// Seconds until `take(1)` would succeed (0 when it would now).
  package func secondsUntilOne() -> Double {
    tokens >= 1 ? 0 : (1 - tokens) / perSecond
  }
}
