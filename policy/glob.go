package policy

import (
	"fmt"

	"github.com/edge-mcp/edge-mcp/guest/glob"
)

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
		if glob.Match(p, name) {
			return true
		}
	}
	return false
}
