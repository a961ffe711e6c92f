// Package statuspage is what the gateway's listener answers about the
// gateway itself: the index page (GET /), /healthz, /readyz and the
// /status document, with the types of the document's entries.
//
// It knows nothing of upstreams or sessions: the gateway hands it a
// Source to read.
//
// Lifetime and concurrency: the handlers hold nothing but their Source
// and may serve any number of requests at once; the Source is read on
// every request.
package statuspage
