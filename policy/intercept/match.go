package intercept

import "strings"

// MatchEvent reports whether an event pattern of a hook with phase ph
// matches event: "*" matches every event, "*/request" and "*/response"
// every event of that phase, "ns/*" every event of namespace ns (e.g.
// "tools/*" matches "tools/call" and "tools/list"), anything else only
// itself.
func MatchEvent(pattern, event string, ph Phase) bool {
	switch pattern {
	case "*":
		return true
	case "*/request":
		return ph == Request
	case "*/response":
		return ph == Response
	}
	if ns, ok := strings.CutSuffix(pattern, "/*"); ok {
		rest, found := strings.CutPrefix(event, ns)
		return found && strings.HasPrefix(rest, "/")
	}
	return pattern == event
}

// Matches reports whether the descriptor hooks event in phase ph.
func (d *Descriptor) Matches(event string, ph Phase) bool {
	for _, h := range d.Hooks {
		if h.Phase != ph {
			continue
		}
		for _, p := range h.Events {
			if MatchEvent(p, event, ph) {
				return true
			}
		}
	}
	return false
}

// HooksEvent reports whether the descriptor hooks event in either phase:
// the interceptors/list event filter.
func (d *Descriptor) HooksEvent(event string) bool {
	return d.Matches(event, Request) || d.Matches(event, Response)
}
