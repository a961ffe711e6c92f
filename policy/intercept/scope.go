package intercept

import (
	"context"
	"fmt"

	"github.com/edge-mcp/edge-mcp/guest/glob"
)

func checkGlobs(lists ...[]string) error {
	for _, l := range lists {
		for _, p := range l {
			if p == "" || len(p) > 512 {
				return fmt.Errorf("scope glob %.64q: want 1 to 512 bytes", p)
			}
		}
	}
	return nil
}

// inScope reports whether the member applies to an event with context c.
func (m *member) inScope(c *Context) bool {
	if len(m.servers) == 0 && len(m.tools) == 0 {
		return true
	}
	if c == nil {
		return true
	}
	return matchScope(m.servers, c.Server) && matchScope(m.tools, c.Subject)
}

func matchScope(globs []string, name string) bool {
	return len(globs) == 0 || name == "" || glob.MatchAny(globs, name)
}

// Select returns the interceptors whose names match one of the globs, in
// order: how a config entry picks interceptors from a server's list.
func Select(ics []Interceptor, names []string) []Interceptor {
	var out []Interceptor
	for _, ic := range ics {
		if glob.MatchAny(names, ic.Describe().Name) {
			out = append(out, ic)
		}
	}
	return out
}

// Unavailable is a stand-in for interceptors that cannot be reached (an
// interceptor server never listed): a validator on every event and phase
// whose every invocation fails with err, so that the chain member's
// failOpen decides, as it would for the missing interceptors.
func Unavailable(name string, err error) Interceptor {
	return &Func{
		Desc: Descriptor{Name: name, Type: Validation, Hooks: []Hook{{Events: []string{"*"}, Phase: Request}, {Events: []string{"*"}, Phase: Response}}},
		Fn: func(_ context.Context, _ *Invocation) (*Result, error) {
			return nil, err
		},
	}
}
