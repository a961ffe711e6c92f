// Package policy runs operator-supplied WebAssembly policy modules for the
// gateway: per-tool hooks that filter the tool catalogue, decide on tool
// calls (allow, deny, rewrite, route), rewrite tool, resource and prompt
// results, and observe events. The wire contract with modules is described
// in ABI.md; modules are written with package guest or by hand.
//
// The pieces:
//
//   - Engine compiles modules (once per binary digest, with an optional
//     on-disk cache) and owns the wazero runtimes, one per memory limit.
//   - Module is a loaded, configured module: a pool of instances, each
//     running one call at a time under a deadline, a memory cap and size
//     limits. A failing instance is discarded and replaced; repeated
//     failures mark the module unhealthy.
//   - Chain applies an ordered list of attachments (a module plus tool and
//     server globs and an on_error policy) to one hook: ToolsList,
//     ToolCall, ToolResult, ResourceResult, PromptResult and Event. Tools
//     that no attachment matches cost one map lookup.
//
// Modules never see gateway credentials and cannot reach files or the
// network: the only imports allowed are a fixed list of WASI preview1
// functions, backed by an empty sandbox. A policy decides; it never sends:
// this package imports neither the runtime nor the transports.
package policy
