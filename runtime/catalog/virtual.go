package catalog

import (
	"bytes"
	"encoding/json"
	"slices"

	"github.com/edge-mcp/edge-mcp/runtime/virtual"
)

// VirtualPagesMax is the largest view whose lists a virtual server keeps
// encoded; a larger one (a server selecting most of a large catalogue) is
// encoded per list request instead of holding a copy of the catalogue.
const VirtualPagesMax = 32 << 10

// RuleName is the name access lists, tool rules and policies know a tool
// by: its catalogue name, also when a virtual server renamed it.
func (it *Item[U, L]) RuleName() string {
	if it.Virtual != nil {
		return it.Virtual.Catalogue()
	}
	return it.Exposed
}

// Virtual builds vs's view of cat: the catalogue's items themselves, a
// copy of the few an override rewrites, and no name index of its own but
// those copies' (Find resolves the rest through cat's). It returns the warnings vs has
// not given before (tools it names that no server offers).
func Virtual[U comparable, L any](vs *virtual.Server, cat *Catalogue[U, L], pageSize int) (*Catalogue[U, L], []string) {
	var lists [virtual.NumKinds]virtual.List
	for k := range NumKinds {
		lists[k] = List[U, L](cat.Lists[k])
	}
	v := vs.Build(lists)
	c := &Catalogue[U, L]{Gen: cat.Gen, share: &share[U, L]{base: cat, sel: v.Selection()}}
	for k := range NumKinds {
		c.Lists[k] = make([]*Item[U, L], 0, v.Len(virtual.Kind(k)))
		size := 0
		for _, e := range v.Entries(virtual.Kind(k)) {
			it := cat.Lists[k][e.Pos]
			if e.Raw != nil {
				cp := *it
				cp.Raw, cp.Virtual = e.Raw, e.Tool
				if e.Name != "" {
					cp.Exposed = e.Name
				}
				it = &cp
				if c.Index[k] == nil {
					c.Index[k] = make(map[string]*Item[U, L])
				}
				c.Index[k][it.Exposed] = it
			}
			c.Lists[k] = append(c.Lists[k], it)
			size += len(it.Raw)
		}
		if size <= VirtualPagesMax {
			c.Pages[k] = EncodePages(k, c.Lists[k], pageSize)
		}
	}
	return c, vs.NewWarnings(v)
}

// share is what a virtual server's view shares with the catalogue it was
// built from.
type share[U comparable, L any] struct {
	base *Catalogue[U, L]
	sel  virtual.Selection
}

// Find returns c's item named name (exposed name, URI or template), or
// nil. A virtual server's view finds its rewritten items in its own index
// and the rest in the catalogue's, when it selects them.
func (c *Catalogue[U, L]) Find(k Kind, name string) *Item[U, L] {
	if it := c.Index[k][name]; it != nil || c.share == nil {
		return it
	}
	if it := c.share.base.Index[k][name]; it != nil && c.share.sel.Serves(virtual.Kind(k), name) {
		return it
	}
	return nil
}

// List reads a catalogue list as runtime/virtual does.
type List[U comparable, L any] []*Item[U, L]

func (l List[U, L]) Len() int                  { return len(l) }
func (l List[U, L]) Key(i int) string          { return l[i].Exposed }
func (l List[U, L]) Raw(i int) json.RawMessage { return l[i].Raw }

// sameItems reports whether two lists hold the same definitions (lists
// not kept encoded: a large virtual server's view).
func sameItems[U comparable, L any](a, b []*Item[U, L]) bool {
	return slices.EqualFunc(a, b, func(x, y *Item[U, L]) bool {
		return x == y || x.Exposed == y.Exposed && bytes.Equal(x.Raw, y.Raw)
	})
}
