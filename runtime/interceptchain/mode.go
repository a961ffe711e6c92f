package interceptchain

import (
	"errors"
	"fmt"

	"github.com/edge-mcp/edge-mcp/policy/intercept"
)

// Errors of SetMode.
var (
	// ErrNoChain: no interceptor chain is configured.
	ErrNoChain = errors.New("no interceptor chain is configured")
	// ErrNotInChain: no member of the chain has that name.
	ErrNotInChain = errors.New("no interceptor of that name is in the chain")
	// ErrSameMode: the member runs in that mode already.
	ErrSameMode = errors.New("the interceptor runs in that mode already")
)

// SetMode changes the mode the chain runs the member name in (audit →
// active: a promotion; active → audit: a demotion) and rebuilds the
// chain at once, without a reload. The override is held by the Set: it
// lasts until the next config reload (or restart), which runs every
// member in the mode the config's interceptors section gives it again.
// It returns the mode the member ran in before.
func (s *Set) SetMode(name string, mode intercept.Mode) (intercept.Mode, error) {
	if s == nil {
		return "", ErrNoChain
	}
	if mode != intercept.Audit && mode != intercept.Active {
		return "", fmt.Errorf("mode %q: want %q or %q", mode, intercept.Audit, intercept.Active)
	}
	var was intercept.Mode
	found := false
	for _, d := range s.Chain().Descriptors() {
		if d.Name == name {
			was, found = d.Mode, true
			break
		}
	}
	switch {
	case !found:
		return "", fmt.Errorf("%w: %q", ErrNotInChain, name)
	case was == mode:
		return was, fmt.Errorf("%w: %q is %s", ErrSameMode, name, mode)
	}
	s.mu.Lock()
	s.modes[name] = mode
	s.lastKey = "" // build anew even if nothing else changed
	s.mu.Unlock()
	return was, s.rebuild()
}
