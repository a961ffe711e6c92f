// Package reconnect keeps one upstream server connected: it runs the
// attempts to connect (a Server does the connecting and serving), retries
// with exponential backoff and jitter, retries at once while calls wait
// for the server (healing), keeps the connection state for /status, and
// pings a live connection to notice a server that went away (Health).
//
// It knows nothing of links, catalogues or sessions: the gateway
// implements Server for each upstream and Pinger for each live link.
//
// Lifetime: a Keeper is made per upstream (New) and Run once, on the
// upstream's goroutine, until its context ends; Await, State, Status and
// Set may be called from any goroutine before, during and after Run.
// Watch runs on the link's own goroutine until the link's context ends or
// the link fails. A Keeper is safe for concurrent use.
package reconnect
