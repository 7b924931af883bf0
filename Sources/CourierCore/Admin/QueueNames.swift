/// Close matches for a queue name that does not exist, so `courier queues pause bililng` can
/// say "did you mean billing?" instead of creating a new, paused queue.
public enum QueueNames {
    /// The names among `known` that `name` is probably a typo of, closest first (then
    /// alphabetical), at most `limit`.
    ///
    /// Close means: equal ignoring case, or within an edit distance (insertions, deletions,
    /// substitutions and swaps of two neighbours, ignoring case) of a third of the name's
    /// length, at least 1 and at most 3. So `bililng` finds `billing` and `mail` finds `mails`,
    /// while `mail` does not find `jobs`.
    public static func closeMatches(to name: String, among known: [String], limit: Int = 3) -> [String] {
        let wanted = Array(name.lowercased())
        let allowed = min(3, max(1, wanted.count / 3))
        var scored: [(distance: Int, name: String)] = []
        for candidate in known where candidate != name {
            let distance = editDistance(wanted, Array(candidate.lowercased()), giveUpAbove: allowed)
            if distance <= allowed { scored.append((distance, candidate)) }
        }
        scored.sort { ($0.distance, $0.name) < ($1.distance, $1.name) }
        return scored.prefix(limit).map(\.name)
    }

    /// The optimal string alignment distance between `a` and `b` (Levenshtein plus swaps of
    /// adjacent characters), or `giveUpAbove + 1` as soon as it must exceed `giveUpAbove`: a
    /// long queue name compared with ten thousand others should not cost a full table each.
    static func editDistance(_ a: [Character], _ b: [Character], giveUpAbove limit: Int) -> Int {
        if abs(a.count - b.count) > limit { return limit + 1 }
        if a.isEmpty || b.isEmpty { return max(a.count, b.count) }
        var previousPrevious = [Int](repeating: 0, count: b.count + 1)
        var previous = Array(0...b.count)
        var current = [Int](repeating: 0, count: b.count + 1)
        for i in 1...a.count {
            current[0] = i
            var rowMinimum = current[0]
            for j in 1...b.count {
                let cost = a[i - 1] == b[j - 1] ? 0 : 1
                var value = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost)
                if i > 1, j > 1, a[i - 1] == b[j - 2], a[i - 2] == b[j - 1] {
                    value = min(value, previousPrevious[j - 2] + 1)
                }
                current[j] = value
                rowMinimum = min(rowMinimum, value)
            }
            if rowMinimum > limit { return limit + 1 }
            (previousPrevious, previous, current) = (previous, current, previousPrevious)
        }
        return previous[b.count]
    }
}
