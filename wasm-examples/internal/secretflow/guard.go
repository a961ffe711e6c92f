package secretflow

import (
	"strings"

	"github.com/edge-mcp/edge-mcp/guest/jsonlite"
)

// Limits of the guard's memory.
const (
	MaxStateBytes      = 60 << 10 // an exported session stops growing here (the host keeps 64 KiB)
	MaxSessions        = 4096     // the oldest session is forgotten past this
	MaxTaintPerSession = 1024     // later secrets of a session are not recorded
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

// Export returns session id's memory as the host's session state: a JSON
// array of strings, the server in flight first, then "value format
// server" per secret (secrets, formats and server names have no spaces),
// at most MaxStateBytes.
func (g *Guard) Export(id string) []byte {
	s := g.session(id)
	out := jsonlite.AppendString([]byte{'['}, s.inFlight)
	for v, o := range s.taint {
		if len(out)+len(v)+len(o.format)+len(o.server)+8 > MaxStateBytes {
			break
		}
		out = append(out, ',')
		out = jsonlite.AppendString(out, v+" "+o.format+" "+o.server)
	}
	return append(out, ']')
}

// Restore replaces session id's memory by what Export returned ({} or an
// empty state: nothing yet).
func (g *Guard) Restore(id string, state []byte) error {
	s := g.session(id)
	s.taint, s.inFlight = map[string]origin{}, ""
	first := true
	return Strings(state, func(b []byte) {
		if first {
			s.inFlight, first = string(b), false
			return
		}
		if f := strings.SplitN(string(b), " ", 3); len(f) == 3 && len(s.taint) < MaxTaintPerSession {
			s.taint[f[0]] = origin{format: f[1], server: f[2]}
		}
	})
}
