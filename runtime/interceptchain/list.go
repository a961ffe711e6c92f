package interceptchain

import (
	"strings"

	"github.com/edge-mcp/edge-mcp/policy/intercept"
)

// Listing is everything a Set is made of: the interceptor servers and
// every interceptor it knows (the modules', the reached servers', the
// stand-ins of servers never reached), whether selected or not, with the
// chain's counts. `edge-mcp interceptors ls` prints it; the admin API
// serves it as GET /admin/interceptors.
type Listing struct {
	Servers      []ListedServer `json:"servers"`
	Interceptors []Listed       `json:"interceptors"`
}

// ListedServer is one interceptor server in a Listing.
type ListedServer struct {
	Name         string   `json:"name"`
	Type         string   `json:"type,omitempty"`
	State        string   `json:"state"` // reached or unreached
	Interceptors int      `json:"interceptors"`
	Skipped      []string `json:"skipped,omitempty"`
	LastError    string   `json:"last_error,omitempty"`
}

// Listed is one interceptor in a Listing: its descriptor as the chain
// runs it (overrides applied) when it is a member, else as its source
// describes it.
type Listed struct {
	Name   string `json:"name"`
	Source string `json:"source"` // "module NAME", "server NAME", "server NAME (not reached)"
	Type   string `json:"type"`
	// Events is the hooks, EVENT,EVENT:PHASE, a hook of both phases
	// as :both.
	Events string `json:"events"`
	Mode   string `json:"mode"`
	// ModeOverride says the mode is a run-time override (POST
	// /admin/interceptors/{name}/promote or demote), not the config's;
	// the next reload ends it.
	ModeOverride bool  `json:"mode_override,omitempty"`
	FailOpen     bool  `json:"fail_open"`
	InChain      bool  `json:"in_chain"`
	Calls        int64 `json:"calls"`
	Denials      int64 `json:"denials"`
	Failures     int64 `json:"failures"`
	Audits       int64 `json:"audits"`
	// P50Micros is the median duration of its last (up to 256)
	// invocations, in microseconds.
	P50Micros int64 `json:"p50_us"`
}

// List returns the Listing of s; an empty one for a nil Set.
func (s *Set) List() *Listing {
	out := &Listing{Servers: []ListedServer{}, Interceptors: []Listed{}}
	if s == nil {
		return out
	}
	ch := s.Chain()
	s.mu.Lock()
	overridden := make(map[string]bool, len(s.modes))
	for name := range s.modes {
		overridden[name] = true
	}
	s.mu.Unlock()
	inChain := map[string]intercept.Descriptor{}
	for _, d := range ch.Descriptors() {
		inChain[d.Name] = d
	}
	row := func(d intercept.Descriptor, source string) {
		l := Listed{Name: d.Name, Source: source}
		if e, ok := inChain[d.Name]; ok {
			d, l.InChain, l.ModeOverride = e, true, overridden[d.Name]
			delete(inChain, d.Name)
			if c := ch.Counters(d.Name); c != nil {
				l.Calls, l.Denials, l.Failures, l.Audits = c.Calls.Load(), c.Denials.Load(), c.Failures.Load(), c.Audits.Load()
				l.P50Micros = c.P50().Microseconds()
			}
		}
		if d.Mode == "" {
			d.Mode = intercept.Active
		}
		l.Type, l.Events, l.Mode, l.FailOpen = string(d.Type), Events(d), string(d.Mode), d.FailOpen
		out.Interceptors = append(out.Interceptors, l)
	}
	s.mu.Lock()
	seen := map[string]bool{}
	for _, e := range s.entries {
		if e.Module == "" || seen[e.Module] {
			continue
		}
		seen[e.Module] = true
		for _, ic := range s.modules[e.Module] {
			row(ic.Describe(), "module "+e.Module)
		}
	}
	s.mu.Unlock()
	for _, st := range s.Servers() {
		ls := ListedServer{Name: st.Name, Type: st.Type, State: "unreached", Interceptors: len(st.Interceptors), Skipped: st.Skipped, LastError: st.Err}
		if st.Reached {
			ls.State = "reached"
		}
		out.Servers = append(out.Servers, ls)
		for _, d := range st.Interceptors {
			row(d, "server "+st.Name)
		}
	}
	for _, d := range ch.Descriptors() {
		if _, left := inChain[d.Name]; left { // a stand-in
			row(d, "server "+strings.SplitN(strings.TrimPrefix(d.Name, "interceptorServers."), "#", 2)[0]+" (not reached)")
		}
	}
	return out
}

// Events writes a descriptor's hooks as EVENT,EVENT:PHASE, a hook of
// both phases as :both.
func Events(d intercept.Descriptor) string {
	var parts []string
	for i := 0; i < len(d.Hooks); i++ {
		h := d.Hooks[i]
		ph := string(h.Phase)
		if i+1 < len(d.Hooks) && h.Phase == intercept.Request && d.Hooks[i+1].Phase == intercept.Response && strings.Join(d.Hooks[i+1].Events, ",") == strings.Join(h.Events, ",") {
			ph = "both"
			i++
		}
		parts = append(parts, strings.Join(h.Events, ",")+":"+ph)
	}
	return strings.Join(parts, " ")
}
