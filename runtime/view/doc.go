// Package view builds what one client session sees of the catalogue: the
// items its identity may use (access lists, before any policy), the tools
// list as tools_list policies leave it (with the session's last good
// outcome when a policy fails), deferred tools moved out of the list
// (they stay callable and searchable) and the gateway's own tools for
// them. A session without any of those sees the shared snapshot itself.
//
// It knows nothing of sessions or upstreams: the gateway hands it an
// Access for the session, and the policy set to run.
//
// Lifetime and concurrency: a Builder is made for one build and used on
// one goroutine; what it returns (a runtime/catalog snapshot and a Good)
// is immutable and the session caches it.
package view
