//go:build wasip1

package guest

// Glob reports whether name matches pattern, in which '*' matches any run of
// characters (including none) and '?' matches exactly one byte. Every other
// byte matches itself. The same syntax is used for the host's "tools" and
// "servers" attachment globs.
func Glob(pattern, name string) bool {
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

// GlobAny reports whether name matches any of patterns.
func GlobAny(patterns []string, name string) bool {
	for _, p := range patterns {
		if Glob(p, name) {
			return true
		}
	}
	return false
}
