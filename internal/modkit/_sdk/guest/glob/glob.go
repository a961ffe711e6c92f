// Package glob is the pattern matching of edge-mcp policy attachments: the
// "tools" and "servers" globs the gateway matches, and guest.Glob, which
// policy modules use to match names the same way. It has no dependencies
// and no build constraints.
package glob

// Match reports whether name matches pattern, in which '*' matches any run
// of bytes (including none) and '?' exactly one byte; every other byte
// matches itself. It runs in O(len(pattern)*len(name)) at worst and
// allocates nothing.
func Match(pattern, name string) bool {
	p, n := 0, 0
	starP, starN := -1, 0
	for n < len(name) {
		switch {
		case p < len(pattern) && pattern[p] == '*':
			starP, starN = p, n
			p++
		case p < len(pattern) && (pattern[p] == '?' || pattern[p] == name[n]):
			p++
			n++
		case starP >= 0:
			starN++
			p, n = starP+1, starN
		default:
			return false
		}
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}

// MatchAny reports whether name matches any of patterns.
func MatchAny(patterns []string, name string) bool {
	for _, p := range patterns {
		if Match(p, name) {
			return true
		}
	}
	return false
}
