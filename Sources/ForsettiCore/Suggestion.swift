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

  /// Edit distance where swapping two neighbours counts as one edit (the commonest typo).
  static func distance(_ a: [Character], _ b: [Character]) -> Int {
    if a.isEmpty { return b.count }
    if b.isEmpty { return a.count }
    var d = [[Int]](repeating: [Int](repeating: 0, count: b.count + 1), count: a.count + 1)
    for i in 0...a.count { d[i][0] = i }
    for j in 0...b.count { d[0][j] = j }
    for i in 1...a.count {
      for j in 1...b.count {
        let cost = a[i - 1] == b[j - 1] ? 0 : 1
        d[i][j] = min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost)
        if i > 1, j > 1, a[i - 1] == b[j - 2], a[i - 2] == b[j - 1] {
          d[i][j] = min(d[i][j], d[i - 2][j - 2] + 1)
        }
      }
    }
    return d[a.count][b.count]
  }
}
