// Package relay carries server→client requests (sampling, elicitation,
// roots) across the gateway: Out is one client session's requests to its
// client on behalf of upstreams (ids, the answers awaited, cancellation),
// Served is one upstream link's requests being served (cancelled by the
// upstream's notifications/cancelled), Newest finds the call in flight an
// unrelated request belongs to, Refusal words the answer to a request
// that belongs to no one client, and CancelParams and CancelledID are the
// params of notifications/cancelled, either way.
//
// It knows nothing of sessions, links or upstreams: the gateway hands Out
// a Client to write to, and Newest the calls in flight of a link.
//
// Lifetime and concurrency: an Out lives as long as its session and ends
// with Close, after which Ask refuses; a Served lives as long as its link.
// Both are safe for concurrent use and their zero values are ready.
package relay
