// Package pins guards against "rug pulls": every tool definition is
// pinned the first time the gateway sees it (internal/pinning keeps the
// pins); when an upstream later serves a different description or schema,
// the tool is withheld (pinning.mode "withhold", the default) or only
// flagged ("flag") until an operator approves the change through the
// admin API. Changes are logged with a diff, once per new definition.
//
// An operator may instead reject a change: the old pin stays, the tool
// stays withheld (in "flag" mode too), and the change is no longer listed
// as pending. Only a different definition from the upstream is offered
// for a decision again (a return to the pinned one simply restores the
// tool). Rejections live as long as the process: after a restart a
// rejected change is pending again, and the tool still withheld.
//
// A Gate knows nothing of catalogues: Filter takes an upstream's tools as
// the gateway holds them, with a function naming each. In a fleet the
// decisions go through a Fleet the gateway hands it (runtime/fleet).
//
// Lifetime and concurrency: a Gate lives as long as the gateway and is
// safe for concurrent use; a nil Store is pinning off.
package pins
