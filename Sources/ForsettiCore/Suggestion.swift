/// "Did you mean …?" for mistyped names: a case-insensitive match first, then the closest
/// candidate by edit distance when it is close enough to be a plausible typo.
public enum Suggestion {
  /// The candidate `input` most plausibly meant, or nil.
  public static func closest(to input: String, among candidates: [String]) -> String? {
    if let same = candidates.first(where: { $0.lowercased() == input.lowercased() && $0 != input }) {
      return same
    }
    let limit = max(1, min(3, input.count / 3))
    var best: (String, Int)?
    for c in candidates {
      let d = distance(Array(input.lowercased()), Array(c.lowercased()))
      if d <= limit, d < (best?.1 ?? Int.max) { best = (c, d) }
    }
    return best?.0
  }

  /// Levenshtein distance between two character arrays.
  static func distance(_ a: [Character], _ b: [Character]) -> Int {
    if a.isEmpty { return b.count }
    if b.isEmpty { return a.count }
    var prev = Array(0...b.count)
    var cur = [Int](repeating: 0, count: b.count + 1)
    for i in 1...a.count {
      cur[0] = i
      for j in 1...b.count {
        cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
      }
      swap(&prev, &cur)
    }
    return prev[b.count]
  }
}
