package secretflow

import "strings"

// Limits of the guard's memory.
const (
	MaxSessions        = 4096 // the oldest session is forgotten past this
	MaxTaintPerSession = 1024 // later secrets of a session are not recorded
)

type origin struct {
	format, server string
}

type session struct {
	taint    map[string]origin
	inFlight string // the server of the session's last request
}

// Guard holds the secrets each session has read, and from where. It is not
// safe for concurrent use (a guest instance runs one call at a time).
type Guard struct {
	sessions map[string]*session
	order    []string // sessions by first use, for eviction
}

// NewGuard returns an empty guard.
func NewGuard() *Guard { return &Guard{sessions: map[string]*session{}} }

func (g *Guard) session(id string) *session {
	if id == "" {
		id = "default"
	}
	s := g.sessions[id]
	if s == nil {
		if len(g.order) >= MaxSessions {
			delete(g.sessions, g.order[0])
			g.order = g.order[1:]
		}
		s = &session{taint: map[string]origin{}}
		g.sessions[id] = s
		g.order = append(g.order, id)
	}
	return s
}

// Check runs at a request to server target: it returns why the request
// must be refused ("" when it may pass) and remembers target as the
// session's server in flight.
func (g *Guard) Check(sessionID, target string, hits []Hit) string {
	s := g.session(sessionID)
	for _, h := range hits {
		if o, ok := s.taint[h.Value]; ok && o.server != target {
			return "cross-boundary secret flow: a " + o.format + " read from server '" + o.server +
				"' may not be sent to server '" + target + "'"
		}
	}
	s.inFlight = target
	return ""
}

// Ingest runs at a response from server (the session's server in flight
// when empty) and records the secrets it carried. It returns how many were
// new.
func (g *Guard) Ingest(sessionID, server string, hits []Hit) int {
	s := g.session(sessionID)
	if server == "" {
		server = s.inFlight
	}
	n := 0
	for _, h := range hits {
		if _, ok := s.taint[h.Value]; ok || len(s.taint) >= MaxTaintPerSession {
			continue
		}
		s.taint[h.Value] = origin{format: h.Format, server: strings.Clone(server)}
		n++
	}
	return n
}

// Sessions returns how many sessions the guard remembers.
func (g *Guard) Sessions() int { return len(g.sessions) }
