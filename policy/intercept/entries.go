package intercept

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/edge-mcp/edge-mcp/guest/glob"
	"github.com/edge-mcp/edge-mcp/internal/wire"
)

// A list event's page aggregates the entries of many servers, so a member
// scoped with Servers or Tools must not see, change or refuse the whole
// page: on the response phase of a list, when the event names the server
// of each entry (Event.EntryServers), it runs on a view of the page that
// holds only the entries of its scope (its invocation context naming
// their servers), its mutation replaces only those entries, and its
// refusal (or fail-closed failure) takes only those entries out of the
// page. Entries outside its scope pass untouched, in their order. A
// member whose scope holds no entry of the page is not invoked. The
// request phase of a list (its cursor) is about the whole list: scoped
// members do not run on it.

// listKeys are, per list event, the result member holding the entries
// and the entry member the Tools globs match (the subject).
var listKeys = map[string]struct{ member, subject string }{
	"tools/list":               {"tools", "name"},
	"prompts/list":             {"prompts", "name"},
	"resources/list":           {"resources", "uri"},
	"resources/templates/list": {"resourceTemplates", "uriTemplate"},
}

// ListMember returns the result member holding the entries of a list
// event ("tools" for tools/list), or "" for other events.
func ListMember(event string) string { return listKeys[event].member }

// scoped reports whether the member has a server or tool scope.
func (m *member) scoped() bool { return len(m.servers) > 0 || len(m.tools) > 0 }

// page is a list event's payload split into its entries, with the server
// of each.
type page struct {
	member, subject string
	items           []json.RawMessage
	servers         []string
}

// newPage splits ev's payload when ev is the response phase of a list
// event whose EntryServers match its entries one to one; nil otherwise
// (scoped members then see the whole payload, as for any event).
func newPage(ev Event, payload json.RawMessage) *page {
	k, ok := listKeys[ev.Event]
	if !ok || ev.Phase != Response || ev.EntryServers == nil {
		return nil
	}
	p := &page{member: k.member, subject: k.subject}
	if err := p.load(payload); err != nil || len(p.items) != len(ev.EntryServers) {
		return nil
	}
	p.servers = slices.Clone(ev.EntryServers)
	return p
}

// load reads the entries of payload.
func (p *page) load(payload json.RawMessage) error {
	arr, ok, err := wire.Field(payload, p.member)
	if err != nil {
		return err
	}
	p.items = nil
	if !ok {
		return fmt.Errorf("no %q array", p.member)
	}
	if err := json.Unmarshal(arr, &p.items); err != nil {
		return fmt.Errorf("%q: %w", p.member, err)
	}
	return nil
}

// in returns the indices of the entries in m's scope.
func (p *page) in(m *member) []int {
	var idx []int
	for i, it := range p.items {
		subject, _ := wire.String(it, p.subject)
		if matchEntry(m.servers, p.servers[i]) && matchEntry(m.tools, subject) {
			idx = append(idx, i)
		}
	}
	return idx
}

// matchEntry matches an entry strictly: an entry of no server (the
// gateway's own) is outside every server scope but "*".
func matchEntry(globs []string, name string) bool {
	return len(globs) == 0 || glob.MatchAny(globs, name)
}

// view is payload with only the entries idx, and ctx naming their
// servers (Server when they are of one).
func (p *page) view(payload json.RawMessage, ctx *Context, idx []int) (json.RawMessage, *Context, error) {
	sub := make([]json.RawMessage, len(idx))
	var servers []string
	for j, i := range idx {
		sub[j] = p.items[i]
		if s := p.servers[i]; s != "" && !slices.Contains(servers, s) {
			servers = append(servers, s)
		}
	}
	v, err := wire.SetField(payload, p.member, array(sub))
	if err != nil {
		return nil, nil, err
	}
	c := &Context{}
	if ctx != nil {
		cp := *ctx
		c = &cp
	}
	c.Server, c.Subject, c.Servers = "", "", servers
	if len(servers) == 1 {
		c.Server = servers[0]
	}
	return v, c, nil
}

// replace puts a scoped mutator's entries (those of its view's result)
// in the places of the entries idx: the k-th takes the k-th place, extra
// ones follow the last place, missing ones leave their places empty;
// each takes the server of its place. It returns the new payload.
func (p *page) replace(payload json.RawMessage, idx []int, result json.RawMessage) (json.RawMessage, error) {
	var got page
	got.member = p.member
	if err := got.load(result); err != nil {
		return nil, fmt.Errorf("mutated payload: %w", err)
	}
	items := make([]json.RawMessage, 0, len(p.items)-len(idx)+len(got.items))
	servers := make([]string, 0, cap(items))
	k := 0
	for i, it := range p.items {
		if k >= len(idx) || idx[k] != i {
			items, servers = append(items, it), append(servers, p.servers[i])
			continue
		}
		if k < len(got.items) {
			items, servers = append(items, got.items[k]), append(servers, p.servers[i])
		}
		k++
		if k == len(idx) {
			for _, extra := range got.items[min(k, len(got.items)):] {
				items, servers = append(items, extra), append(servers, p.servers[i])
			}
		}
	}
	return p.set(payload, items, servers)
}

// follow reads the entries again after a mutator of the whole page
// changed it: the same number of entries keep the servers of their
// places, else each takes the server of the entry of its name or URI
// before ("" when none had it).
func (p *page) follow(payload json.RawMessage) {
	before, servers := p.items, p.servers
	if err := p.load(payload); err != nil {
		p.items = nil // CheckShape passed, so the member is absent: no entries
	}
	if len(p.items) == len(before) {
		return
	}
	of := make(map[string]string, len(before))
	for i, it := range before {
		if s, ok := wire.String(it, p.subject); ok {
			of[s] = servers[i]
		}
	}
	p.servers = make([]string, len(p.items))
	for i, it := range p.items {
		s, _ := wire.String(it, p.subject)
		p.servers[i] = of[s]
	}
}

// drop takes the entries idx out of payload.
func (p *page) drop(payload json.RawMessage, idx map[int]bool) (json.RawMessage, error) {
	var items []json.RawMessage
	var servers []string
	for i, it := range p.items {
		if !idx[i] {
			items, servers = append(items, it), append(servers, p.servers[i])
		}
	}
	return p.set(payload, items, servers)
}

// set makes items the entries of payload.
func (p *page) set(payload json.RawMessage, items []json.RawMessage, servers []string) (json.RawMessage, error) {
	out, err := wire.SetField(payload, p.member, array(items))
	if err != nil {
		return nil, err
	}
	p.items, p.servers = items, servers
	return out, nil
}

// array encodes raw values as a JSON array.
func array(items []json.RawMessage) json.RawMessage {
	n := 2
	for _, it := range items {
		n += len(it) + 1
	}
	b := make([]byte, 0, n)
	b = append(b, '[')
	for i, it := range items {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, it...)
	}
	return append(b, ']')
}
