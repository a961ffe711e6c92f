// Package catalog is the aggregated catalogue the gateway serves: what
// each upstream offers (tools, prompts, resources, resource templates),
// parsed from its list results (Parse), merged in config order into an
// immutable snapshot (Catalogue) with its list pages encoded once
// (runtime/listing), its name conflicts, the tools withheld by pinning and
// the names of servers that went down.
//
// It knows nothing of upstreams or sessions: an item's server is a U (the
// gateway's upstream) and a tool the gateway answers itself carries an L
// (the gateway's function for it).
//
// Lifetime and concurrency: a Catalogue is immutable once built and may be
// read from any goroutine. Offers, which builds them, is not safe for
// concurrent use: its owner (the gateway's router) holds a lock around
// every call, and swaps the snapshots it returns in atomically.
package catalog
