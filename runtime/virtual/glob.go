package virtual

// match reports whether name matches the glob pattern, in which "*"
// matches any run of characters (dots and slashes too) and every other
// character itself.
func match(pattern, name string) bool {
	// The classic greedy match with one backtrack point: linear in
	// practice, never exponential.
	p, n := 0, 0
	star, from := -1, 0
	for n < len(name) {
		switch {
		case p < len(pattern) && pattern[p] == '*':
			star, from = p, n
			p++
		case p < len(pattern) && pattern[p] == name[n]:
			p++
			n++
		case star >= 0:
			from++
			p, n = star+1, from
		default:
			return false
		}
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}

// matchAny reports whether any of patterns matches name.
func matchAny(patterns []string, name string) bool {
	for _, p := range patterns {
		if match(p, name) {
			return true
		}
	}
	return false
}
