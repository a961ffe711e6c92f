package policy

import "fmt"

// glob reports whether name matches pattern, where '*' matches any run of
// bytes (including none) and '?' exactly one byte. It runs in
// O(len(pattern)*len(name)) at worst and allocates nothing.
func glob(pattern, name string) bool {
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

// globSet is a list of globs; empty matches everything.
type globSet []string

func newGlobSet(field string, patterns []string) (globSet, error) {
	for _, p := range patterns {
		if p == "" {
			return nil, fmt.Errorf("%s: empty glob", field)
		}
		if len(p) > 512 {
			return nil, fmt.Errorf("%s: glob longer than 512 bytes", field)
		}
	}
	for _, p := range patterns {
		if p == "*" {
			return nil, nil
		}
	}
	return globSet(patterns), nil
}

func (g globSet) match(name string) bool {
	if len(g) == 0 {
		return true
	}
	for _, p := range g {
		if glob(p, name) {
			return true
		}
	}
	return false
}
