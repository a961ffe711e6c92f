package virtual

import (
	"encoding/json"
	"fmt"
	"slices"
)

// Kind names one of the catalogue's lists.
type Kind int

const (
	Tools Kind = iota
	Prompts
	Resources
	Templates // resource templates, selected by the "resources" patterns
	NumKinds
)

// List is one list of the shared catalogue, read by position: the key is
// an item's exposed name (tools, prompts), URI (resources) or URI
// template, raw its definition as the catalogue serves it.
type List interface {
	Len() int
	Key(i int) string
	Raw(i int) json.RawMessage
}

// Server is a compiled virtual server.
type Server struct {
	Config
	overrides map[string]*Tool // by catalogue name
	allow     map[string]bool  // nil: every identity
	state     serverState
}

// Compile compiles c; it fails as Check does.
func Compile(c Config) (*Server, error) {
	if e := Check(c); e != nil {
		return nil, e
	}
	s := &Server{Config: c, overrides: make(map[string]*Tool, len(c.Overrides))}
	for _, o := range c.Overrides {
		s.overrides[o.Tool] = compileTool(o)
	}
	if len(c.Allow) > 0 {
		s.allow = make(map[string]bool, len(c.Allow))
		for _, id := range c.Allow {
			s.allow[id] = true
		}
	}
	return s, nil
}

// Selects reports whether s's globs select the catalogue item key of
// kind k (whether or not the catalogue has it now).
func (s *Server) Selects(k Kind, key string) bool {
	switch k {
	case Tools:
		return matchAny(s.Tools, key)
	case Prompts:
		return matchAny(s.Prompts, key)
	}
	return matchAny(s.Resources, key)
}

// Allowed reports whether the identity may use the server (the global
// access rules apply besides).
func (s *Server) Allowed(identity string) bool { return s.allow == nil || s.allow[identity] }

// Entry is one item of a view.
type Entry struct {
	// Pos is the item's position in the catalogue's list.
	Pos int
	// Name is the item's name in the view when an override renamed it;
	// "": its catalogue key.
	Name string
	// Raw is the rewritten definition of an overridden tool; nil: the
	// catalogue's, unchanged.
	Raw json.RawMessage
	// Tool is the override of the tool; nil when there is none.
	Tool *Tool
}

// View is a Server applied to one snapshot of the catalogue: the items it
// selects, in the catalogue's order (server order of the configuration,
// then each server's own), which is deterministic for a given snapshot.
type View struct {
	Server  *Server
	entries [NumKinds][]Entry
	// Warnings are what the catalogue made of the configuration: an
	// overridden tool no server offers (kept: it may appear later), a
	// renamed tool that shadows another.
	Warnings []string
	sel      Selection
}

// Selection answers, without a copy of the catalogue's name index, which
// catalogue items a view serves under their catalogue key: a caller keeps
// it beside the view's few rewritten items (those with Entry.Raw) and
// resolves a name by them first, then by the catalogue's own index and
// Serves. It is small: the server and the catalogue names of the tools
// the view renamed.
type Selection struct {
	server  *Server
	renamed map[string]bool // catalogue names served under another name
}

// Selection returns v's selection.
func (v *View) Selection() Selection { return v.sel }

// Serves reports whether the view serves the catalogue item key of kind k
// under that key (given the catalogue has it): its globs select it and no
// override renamed it. A name an override gave to another tool is not
// this selection's to answer: the caller finds the rewritten item first.
func (s Selection) Serves(k Kind, key string) bool {
	return s.server != nil && s.server.Selects(k, key) && !(k == Tools && s.renamed[key])
}

// Build applies s to the catalogue lists (indexed by Kind; Templates
// select by the Resources patterns).
func (s *Server) Build(lists [NumKinds]List) *View {
	v := &View{Server: s, sel: Selection{server: s}}
	globs := [NumKinds][]string{Tools: s.Tools, Prompts: s.Prompts, Resources: s.Resources, Templates: s.Resources}
	for k := range NumKinds {
		l := lists[k]
		if l == nil || len(globs[k]) == 0 {
			continue
		}
		for i := range l.Len() {
			if key := l.Key(i); matchAny(globs[k], key) {
				v.entries[k] = append(v.entries[k], Entry{Pos: i})
			}
		}
	}
	if len(s.overrides) > 0 && lists[Tools] != nil {
		v.override(lists[Tools])
	}
	return v
}

// override applies the tool overrides to v's tools.
func (v *View) override(l List) {
	s := v.Server
	found := make(map[string]bool, len(s.overrides))
	renamed := make(map[string]string) // new name → catalogue name
	for i := range v.entries[Tools] {
		e := &v.entries[Tools][i]
		key := l.Key(e.Pos)
		t := s.overrides[key]
		if t == nil {
			continue
		}
		found[key] = true
		raw, err := t.definition(l.Raw(e.Pos))
		if err != nil {
			v.Warnings = append(v.Warnings, fmt.Sprintf("overrides.%s: the tool's definition cannot be rewritten (%v); served unchanged", key, err))
			continue
		}
		e.Raw, e.Tool, e.Name = raw, t, t.name
		if t.name != "" {
			renamed[t.name] = key
			if v.sel.renamed == nil {
				v.sel.renamed = make(map[string]bool, len(s.overrides))
			}
			v.sel.renamed[key] = true
		}
	}
	for _, o := range s.Overrides {
		if !found[o.Tool] {
			v.Warnings = append(v.Warnings, fmt.Sprintf("overrides.%s: no server offers tool %q (yet); the override applies when one does", o.Tool, o.Tool))
		}
	}
	if len(renamed) == 0 {
		return
	}
	// A renamed tool takes its name from a catalogue tool of that name.
	v.entries[Tools] = slices.DeleteFunc(v.entries[Tools], func(e Entry) bool {
		key := l.Key(e.Pos)
		if from, ok := renamed[key]; ok && e.Name == "" {
			v.Warnings = append(v.Warnings, fmt.Sprintf("overrides.%s.name: %q shadows the tool of that name, which the view leaves out", from, key))
			return true
		}
		return false
	})
}

// Len returns the number of items of kind k in the view.
func (v *View) Len(k Kind) int { return len(v.entries[k]) }

// At returns the i-th item of kind k.
func (v *View) At(k Kind, i int) Entry { return v.entries[k][i] }

// Entries returns the items of kind k, in order; the caller must not
// change them.
func (v *View) Entries(k Kind) []Entry { return v.entries[k] }

// Hidden reports why the view does not serve the catalogue tool named key
// ("" when it does, or when no such tool is in the catalogue): for the log
// and audit of a client calling it.
func (v *View) Hidden(l List, key string) string {
	for _, e := range v.entries[Tools] {
		if l.Key(e.Pos) == key {
			if e.Name != "" {
				return fmt.Sprintf("virtual server %q serves tool %q as %q", v.Server.Name, key, e.Name)
			}
			return ""
		}
	}
	return fmt.Sprintf("virtual server %q does not select tool %q", v.Server.Name, key)
}

// Why says why s does not serve the catalogue tool named key, for the
// log and audit of a client calling it (see View.Hidden).
func (s *Server) Why(tools List, key string) string {
	return s.Build([NumKinds]List{Tools: tools}).Hidden(tools, key)
}

// Renamed returns the catalogue name of the tool an override of s gives
// the name name, and whether there is one.
func (s *Server) Renamed(name string) (string, bool) {
	for _, o := range s.Overrides {
		if o.Name == name {
			return o.Tool, true
		}
	}
	return "", false
}

// RenamedAway reports whether an override of s gives the catalogue tool
// name another name (so that s serves nothing under name but a tool
// renamed to it).
func (s *Server) RenamedAway(name string) bool {
	for _, o := range s.Overrides {
		if o.Tool == name && o.Name != "" && o.Name != name {
			return true
		}
	}
	return false
}
