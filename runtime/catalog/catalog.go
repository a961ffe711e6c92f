package catalog

import (
	"encoding/json"
	"fmt"
	"log/slog"

	"github.com/yosida95/uritemplate/v3"

	"github.com/edge-mcp/edge-mcp/internal/wire"
	"github.com/edge-mcp/edge-mcp/runtime/listing"
	"github.com/edge-mcp/edge-mcp/runtime/virtual"
)

// Kind names one of the four aggregated lists.
type Kind int

// The lists.
const (
	Tools Kind = iota
	Prompts
	Resources
	Templates
	NumKinds
)

// Kinds describes each list: its list method, the result member that
// holds the items, the item member that identifies an item, and the
// notification that announces a change.
var Kinds = [NumKinds]struct {
	Method, Member, Key, Changed string
}{
	Tools:     {"tools/list", "tools", "name", "notifications/tools/list_changed"},
	Prompts:   {"prompts/list", "prompts", "name", "notifications/prompts/list_changed"},
	Resources: {"resources/list", "resources", "uri", "notifications/resources/list_changed"},
	Templates: {"resources/templates/list", "resourceTemplates", "uriTemplate", "notifications/resources/list_changed"},
}

// Item is one upstream definition (tool, prompt, resource or template) as
// the catalogue serves it.
type Item[U comparable, L any] struct {
	Up       U
	Name     string          // the upstream's own name, URI or URI template
	Exposed  string          // the name clients see (prefixed tools and prompts)
	Raw      json.RawMessage // the definition as the upstream sent it, with the exposed name
	Template *uritemplate.Template
	// Local, when set, answers calls of the item in the gateway itself
	// (the gateway's own tools); Up is the zero U then.
	Local L
	// Virtual is the override of a virtual server's tool (Virtual).
	Virtual *virtual.Tool
}

// Lists is what one upstream currently offers, in its own order.
type Lists[U comparable, L any] [NumKinds][]Item[U, L]

// Catalogue is an immutable snapshot of everything the gateway serves. A
// new snapshot is built whenever an upstream's offer changes and swapped
// in atomically; requests read the snapshot they started with.
type Catalogue[U comparable, L any] struct {
	Gen   uint64
	Lists [NumKinds][]*Item[U, L]
	Index [NumKinds]map[string]*Item[U, L] // exposed name, URI or template → item
	Pages [NumKinds][]json.RawMessage
	// Deferred are the tools of a session's view left out of its tools
	// list: callable by name, found by search.
	Deferred []*Item[U, L]
	// Conflicts are the names more than one server offers, and who got
	// them; Offers logs each once.
	Conflicts []Conflict
	// Withheld are the tools tool pinning keeps out of the catalogue
	// (changed since pinned, awaiting approval), by exposed name.
	Withheld map[string]*Item[U, L]
	// Gone are the tools and prompts of upstreams that were connected and
	// are not now, by exposed name: a call of one is answered with the
	// server's state rather than "unknown tool".
	Gone [NumKinds]map[string]*Item[U, L]
	// share is, for a virtual server's view, what it shares with the
	// catalogue it was built from: Index then holds only the view's
	// rewritten items (Find).
	share *share[U, L]
}

// Conflict is a name two servers offer: Winner serves it, Loser's is not
// exposed (Reserved: the name is reserved for Winner by the config).
type Conflict struct {
	Kind          Kind
	Name          string
	Winner, Loser string
	Reserved      bool
}

// Build merges the offers of the servers named names (in config order).
// Names pinned by reserved (exposed name → server) are never taken by
// another server; otherwise the first server wins. Conflicts are recorded
// in the snapshot (Offers logs each once, not on every rebuild). Tools and
// prompts are matched by their exposed (possibly prefixed) names,
// resources and templates by their URI or URI template, which no prefix
// changes.
func Build[U comparable, L any](gen uint64, names []string, offers []*Lists[U, L], reserved [NumKinds]map[string]string, pageSize int) *Catalogue[U, L] {
	c := &Catalogue[U, L]{Gen: gen}
	for k := range NumKinds {
		c.Index[k] = make(map[string]*Item[U, L])
		owner := make(map[string]string) // exposed name → the server that got it
		for i, off := range offers {
			if off == nil {
				continue
			}
			for j := range off[k] {
				it := &off[k][j]
				if o, ok := reserved[k][it.Exposed]; ok && o != names[i] {
					c.Conflicts = append(c.Conflicts, Conflict{Kind: k, Name: it.Exposed, Winner: o, Loser: names[i], Reserved: true})
					continue
				}
				if _, ok := c.Index[k][it.Exposed]; ok {
					c.Conflicts = append(c.Conflicts, Conflict{Kind: k, Name: it.Exposed, Winner: owner[it.Exposed], Loser: names[i]})
					continue
				}
				c.Index[k][it.Exposed] = it
				owner[it.Exposed] = names[i]
				c.Lists[k] = append(c.Lists[k], it)
			}
		}
		c.Pages[k] = EncodePages(k, c.Lists[k], pageSize)
	}
	return c
}

// EncodePages encodes the list results once per snapshot, so a list
// request costs a slice lookup (runtime/listing).
func EncodePages[U comparable, L any](k Kind, items []*Item[U, L], pageSize int) []json.RawMessage {
	return listing.Pages(Kinds[k].Member, items, raw[U, L], pageSize)
}

func raw[U comparable, L any](it *Item[U, L]) json.RawMessage { return it.Raw }

// Page returns the list result for cursor ("" for the first page).
func (c *Catalogue[U, L]) Page(k Kind, cursor string, pageSize int) (json.RawMessage, error) {
	if c.Pages[k] == nil { // a large virtual server's view
		return listing.Page(EncodePages(k, c.Lists[k], pageSize), Kinds[k].Member, c.Lists[k], raw[U, L], cursor, pageSize)
	}
	return listing.Page(c.Pages[k], Kinds[k].Member, c.Lists[k], raw[U, L], cursor, pageSize)
}

// Servers names the server of each entry of page, a page of list k of
// c, in order: name of its item's U, "" for an item without one (the
// gateway's own tools) or a name c does not hold; nil when the page does
// not parse.
func (c *Catalogue[U, L]) Servers(k Kind, page json.RawMessage, name func(U) string) []string {
	arr, ok, err := wire.Field(page, Kinds[k].Member)
	var entries []json.RawMessage
	if err != nil || !ok || json.Unmarshal(arr, &entries) != nil {
		return nil
	}
	var none U
	servers := make([]string, len(entries))
	for i, e := range entries {
		key, _ := wire.String(e, Kinds[k].Key)
		if it := c.Find(k, key); it != nil && it.Up != none {
			servers[i] = name(it.Up)
		}
	}
	return servers
}

// Resource finds the server that serves uri: an exact resource first,
// then the first matching template; the zero U when none does.
func (c *Catalogue[U, L]) Resource(uri string) U {
	if it := c.Find(Resources, uri); it != nil {
		return it.Up
	}
	for _, it := range c.Lists[Templates] {
		if it.Template != nil && it.Template.Match(uri) != nil {
			return it.Up
		}
	}
	var none U
	return none
}

// Same reports whether two snapshots serve the same list k.
func Same[U comparable, L any](a, b *Catalogue[U, L], k Kind) bool {
	if a == nil || b == nil {
		return a == b
	}
	if a.Pages[k] == nil || b.Pages[k] == nil {
		return sameItems(a.Lists[k], b.Lists[k])
	}
	return listing.Same(a.Pages[k], b.Pages[k])
}

// Parse splits one list result of kind k into items of server up,
// renaming tools and prompts to prefix_name when prefix is set. Items it
// cannot use are skipped with a warning on log.
func Parse[U comparable, L any](up U, prefix string, log *slog.Logger, k Kind, result json.RawMessage) ([]Item[U, L], string, error) {
	raws, next, err := listing.Parse(result, Kinds[k].Method, Kinds[k].Member)
	if err != nil {
		return nil, "", err
	}
	items := make([]Item[U, L], 0, len(raws))
	for _, raw := range raws {
		name, ok := wire.String(raw, Kinds[k].Key)
		if !ok || name == "" {
			log.Warn("skipping list item without a string key", "method", Kinds[k].Method, "key", Kinds[k].Key)
			continue
		}
		it := Item[U, L]{Up: up, Name: name, Exposed: name, Raw: raw}
		if (k == Tools || k == Prompts) && prefix != "" {
			it.Exposed = prefix + "_" + name
			renamed, err := wire.SetField(raw, "name", wire.AppendString(nil, it.Exposed))
			if err != nil {
				return nil, "", fmt.Errorf("renaming %q: %w", name, err)
			}
			it.Raw = renamed
		}
		if k == Templates {
			t, err := uritemplate.New(name)
			if err != nil {
				log.Warn("resource template does not parse; reads will not route by it", "template", name, "err", err)
			} else {
				it.Template = t
			}
		}
		items = append(items, it)
	}
	return items, next, nil
}
