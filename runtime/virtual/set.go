package virtual

import (
	"reflect"
	"sync"
	"sync/atomic"
)

// Set is the virtual servers of one configuration, by path and by name.
// A nil *Set has none.
type Set struct {
	byPath, byName map[string]*Server
	list           []*Server
}

// NewSet compiles cfgs. A server whose configuration prev holds unchanged
// is kept as it is (with its cached views), so a reload rebuilds only the
// virtual servers it changes.
func NewSet(cfgs []Config, prev *Set) (*Set, error) {
	s := &Set{byPath: make(map[string]*Server, len(cfgs)), byName: make(map[string]*Server, len(cfgs))}
	for _, c := range cfgs {
		srv := prev.ByName(c.Name)
		if srv == nil || !reflect.DeepEqual(srv.Config, c) {
			var err error
			if srv, err = Compile(c); err != nil {
				return nil, err
			}
		}
		s.byPath[c.Path], s.byName[c.Name] = srv, srv
		s.list = append(s.list, srv)
	}
	return s, nil
}

// ByPath returns the server at path, or nil.
func (s *Set) ByPath(path string) *Server {
	if s == nil {
		return nil
	}
	return s.byPath[path]
}

// ByName returns the server named name, or nil.
func (s *Set) ByName(name string) *Server {
	if s == nil {
		return nil
	}
	return s.byName[name]
}

// Servers returns the servers in configuration order.
func (s *Set) Servers() []*Server {
	if s == nil {
		return nil
	}
	return s.list
}

// cache is what a caller built from one catalogue generation.
type cache struct {
	gen uint64
	v   any
}

// serverState is a server's mutable state beside its configuration.
type serverState struct {
	cached atomic.Pointer[cache]
	mu     sync.Mutex
	warned map[string]bool
}

// Cached returns what Store stored for the catalogue generation gen, or
// nil: the gateway keeps the endpoint it built from the server's latest
// view there, shared by every session of the server.
func (s *Server) Cached(gen uint64) any {
	if c := s.state.cached.Load(); c != nil && c.gen == gen {
		return c.v
	}
	return nil
}

// Store keeps v as built from catalogue generation gen.
func (s *Server) Store(gen uint64, v any) { s.state.cached.Store(&cache{gen, v}) }

// NewWarnings returns the warnings of v not returned before for s, so
// that each is logged once rather than at every catalogue change.
func (s *Server) NewWarnings(v *View) []string {
	s.state.mu.Lock()
	defer s.state.mu.Unlock()
	var out []string
	for _, w := range v.Warnings {
		if !s.state.warned[w] {
			if s.state.warned == nil {
				s.state.warned = make(map[string]bool)
			}
			s.state.warned[w] = true
			out = append(out, w)
		}
	}
	return out
}
