package catalog

import (
	"log/slog"
	"slices"
)

// Offers is what each server offers now, and what the servers that went
// down offered last; it builds the snapshots from them. Its owner holds a
// lock around every call (see the package doc).
type Offers[U comparable, L any] struct {
	log      *slog.Logger
	pageSize int
	name     func(U) string // a server's name, as the config names it
	gen      uint64
	reserved [NumKinds]map[string]string
	now      map[U]*Lists[U, L]
	// last is what each server offered before it went down, to answer a
	// call of one of its tools with its state.
	last map[U]*Lists[U, L]
	// logged are the name conflicts of the current snapshot, logged when
	// they appeared.
	logged map[Conflict]struct{}
}

// NewOffers makes the offers of no server yet: snapshots have pages of
// pageSize items, names reserved by the config go to their server, and
// name tells a server's name.
func NewOffers[U comparable, L any](log *slog.Logger, pageSize int, reserved [NumKinds]map[string]string, name func(U) string) *Offers[U, L] {
	return &Offers[U, L]{log: log, pageSize: pageSize, name: name, reserved: reserved,
		now: make(map[U]*Lists[U, L]), last: make(map[U]*Lists[U, L]), logged: make(map[Conflict]struct{})}
}

// Offer is what u offers now (nil: it is down).
func (o *Offers[U, L]) Offer(u U) *Lists[U, L] { return o.now[u] }

// Set replaces everything u offers (nil: it went down). stays: u is still
// configured; what a server removed by a reload offered is not kept.
func (o *Offers[U, L]) Set(u U, offer *Lists[U, L], stays bool) {
	if cur := o.now[u]; offer == nil && cur != nil && stays {
		o.last[u] = cur
	} else if offer != nil {
		delete(o.last, u)
	}
	if offer == nil {
		delete(o.now, u)
		return
	}
	o.now[u] = offer
}

// Update replaces the lists named by kinds of u's offer with fresh's.
func (o *Offers[U, L]) Update(u U, kinds []Kind, fresh *Lists[U, L]) {
	next := &Lists[U, L]{}
	if cur := o.now[u]; cur != nil {
		*next = *cur
	}
	for _, k := range kinds {
		next[k] = fresh[k]
	}
	o.now[u] = next
}

// Reconfigure takes the reserved names of a new configuration, and
// forgets the last offers of the servers it no longer has.
func (o *Offers[U, L]) Reconfigure(reserved [NumKinds]map[string]string, configured func(U) bool) {
	o.reserved = reserved
	for u := range o.last {
		if !configured(u) {
			delete(o.last, u) // removed by the reload: unknown from now on
		}
	}
}

// Build builds the next snapshot of ups, in config order: each offer
// passes through pin when it is not nil (tool pinning; what it leaves out
// is withheld), and the snapshot's new name conflicts are logged.
func (o *Offers[U, L]) Build(ups []U, pin func(U, *Lists[U, L]) *Lists[U, L]) *Catalogue[U, L] {
	o.gen++
	names := make([]string, len(ups))
	offers := make([]*Lists[U, L], len(ups))
	withheld := make(map[string]*Item[U, L])
	for i, u := range ups {
		names[i], offers[i] = o.name(u), o.now[u]
		if pin != nil {
			offers[i] = pin(u, o.now[u])
			addWithheld(withheld, o.now[u], offers[i])
		}
	}
	next := Build(o.gen, names, offers, o.reserved, o.pageSize)
	next.Withheld = withheld
	next.Gone = o.gone(ups)
	o.LogConflicts(next.Conflicts)
	return next
}

// addWithheld adds to withheld the tools of offer that pinning left out
// of kept.
func addWithheld[U comparable, L any](withheld map[string]*Item[U, L], offer, kept *Lists[U, L]) {
	if offer == nil || kept == nil || len(offer[Tools]) == len(kept[Tools]) {
		return
	}
	in := make(map[string]bool, len(kept[Tools]))
	for _, it := range kept[Tools] {
		in[it.Name] = true
	}
	for i := range offer[Tools] {
		if it := &offer[Tools][i]; !in[it.Name] {
			withheld[it.Exposed] = it
		}
	}
}

// gone indexes the tools and prompts last offered by the servers of ups
// that are down now.
func (o *Offers[U, L]) gone(ups []U) [NumKinds]map[string]*Item[U, L] {
	var gone [NumKinds]map[string]*Item[U, L]
	for _, k := range []Kind{Tools, Prompts} {
		gone[k] = make(map[string]*Item[U, L])
		for _, u := range ups {
			last := o.last[u]
			if o.now[u] != nil || last == nil {
				continue
			}
			for i := range last[k] {
				if _, taken := gone[k][last[k][i].Exposed]; !taken {
					gone[k][last[k][i].Exposed] = &last[k][i]
				}
			}
		}
	}
	return gone
}

// LogConflicts logs the name conflicts of a new snapshot that the
// previous one did not have: a conflict is logged when it appears or
// changes (another winner or loser), not on every rebuild.
func (o *Offers[U, L]) LogConflicts(conflicts []Conflict) {
	now := make(map[Conflict]struct{}, len(conflicts))
	for _, c := range conflicts {
		now[c] = struct{}{}
		if _, logged := o.logged[c]; logged {
			continue
		}
		if c.Reserved {
			o.log.Warn("name reserved for another server; not exposed",
				"kind", Kinds[c.Kind].Member, "name", c.Name, "server", c.Loser, "reserved_for", c.Winner)
			continue
		}
		o.log.Warn("name conflict; first server in config order wins",
			"kind", Kinds[c.Kind].Member, "name", c.Name, "winner", c.Winner, "loser", c.Loser)
	}
	o.logged = now
}

// Announced are the list_changed methods of kinds, once each.
func Announced(kinds []Kind) []string {
	var out []string
	for _, k := range kinds {
		if m := Kinds[k].Changed; !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	return out
}

// Changed are the list_changed methods in always, then those of the
// lists that differ between old and next, once each.
func Changed[U comparable, L any](old, next *Catalogue[U, L], always []string) []string {
	changed := slices.Clone(always)
	for _, k := range []Kind{Tools, Prompts} {
		if m := Kinds[k].Changed; !Same(old, next, k) && !slices.Contains(changed, m) {
			changed = append(changed, m)
		}
	}
	if m := Kinds[Resources].Changed; (!Same(old, next, Resources) || !Same(old, next, Templates)) &&
		!slices.Contains(changed, m) {
		changed = append(changed, m)
	}
	return changed
}
