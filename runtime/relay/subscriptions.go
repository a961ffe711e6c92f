package relay

import "sync"

// Subscriptions are the resource subscriptions of a gateway's sessions
// (S): which sessions follow which URI. Safe for concurrent use; the zero
// value has none.
type Subscriptions[S comparable] struct {
	mu   sync.Mutex
	subs map[string]map[S]struct{} // resource URI → subscribed sessions; made on first use
}

// Subscribe records that s wants updates for uri and reports whether it
// is the first subscriber (so the upstream must be told).
func (r *Subscriptions[S]) Subscribe(s S, uri string) (first bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.subs == nil {
		r.subs = make(map[string]map[S]struct{})
	}
	set := r.subs[uri]
	if set == nil {
		set = make(map[S]struct{})
		r.subs[uri] = set
	}
	first = len(set) == 0
	set[s] = struct{}{}
	return first
}

// Unsubscribe removes s from uri's subscribers and reports whether it was
// the last one.
func (r *Subscriptions[S]) Unsubscribe(s S, uri string) (last bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	set := r.subs[uri]
	if _, ok := set[s]; !ok {
		return false
	}
	delete(set, s)
	if len(set) == 0 {
		delete(r.subs, uri)
		return true
	}
	return false
}

// Subscribed reports whether s is subscribed to uri.
func (r *Subscriptions[S]) Subscribed(s S, uri string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.subs[uri][s]
	return ok
}

// Subscribers are the sessions subscribed to uri.
func (r *Subscriptions[S]) Subscribers(uri string) []S {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]S, 0, len(r.subs[uri]))
	for s := range r.subs[uri] {
		out = append(out, s)
	}
	return out
}

// Forget removes s from every subscription and returns the URIs it was
// the last subscriber of (the upstream must be told).
func (r *Subscriptions[S]) Forget(s S) (unsubscribe []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for uri, set := range r.subs {
		if _, ok := set[s]; ok {
			delete(set, s)
			if len(set) == 0 {
				delete(r.subs, uri)
				unsubscribe = append(unsubscribe, uri)
			}
		}
	}
	return unsubscribe
}
