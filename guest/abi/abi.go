// Package abi holds the names and numbers of the edge-mcp policy module
// ABI (policy/ABI.md in the edge-mcp repository), defined once for both
// sides: the guest SDK (package guest) exports what it names, and the host
// (package policy) looks for it. It has no dependencies and no build
// constraints.
package abi

// The ABI version: edge_abi_version returns Major<<16 | Minor. A host accepts
// a module whose major equals its own and whose minor is not newer.
const (
	Major   = 1
	Minor   = 1
	Version = Major<<16 | Minor
)

// Names of the module's exports.
const (
	ExportMemory     = "memory"           // the module's own linear memory
	ExportVersion    = "edge_abi_version" // () -> i32
	ExportHooks      = "edge_hooks"       // () -> i32, the bit set of implemented hooks
	ExportAlloc      = "edge_alloc"       // (size i32) -> i32
	ExportConfigure  = "edge_configure"   // (ptr i32, len i32) -> i64
	ExportInitialize = "_initialize"      // reactor initialisation
	ExportStart      = "_start"           // a WASI command's entry point, refused
	HookExportPrefix = "edge_hook_"       // + hook name: (ptr i32, len i32) -> i64
)

// The hooks, numbered by their bit in the edge_hooks mask.
const (
	HookToolsList = iota
	HookToolCall
	HookToolResult
	HookResourceResult
	HookPromptResult
	HookEvent
	// ABI 1.1: SEP-2624 interceptors.
	HookInterceptors // the module's interceptor descriptors
	HookIntercept    // one interceptor invocation
	NumHooks         // the number of hooks of this ABI version
)

// HookName returns the ABI name of hook h (e.g. "tool_call"), or "" when h
// is not a hook of this ABI version.
func HookName(h int) string {
	switch h {
	case HookToolsList:
		return "tools_list"
	case HookToolCall:
		return "tool_call"
	case HookToolResult:
		return "tool_result"
	case HookResourceResult:
		return "resource_result"
	case HookPromptResult:
		return "prompt_result"
	case HookEvent:
		return "event"
	case HookInterceptors:
		return "interceptors"
	case HookIntercept:
		return "intercept"
	}
	return ""
}

// HookExport returns the name of hook h's export, e.g. "edge_hook_tool_call".
func HookExport(h int) string { return HookExportPrefix + HookName(h) }

// The actions of a tool_call decision ("action" in the output).
const (
	ActionAllow   = "allow"
	ActionDeny    = "deny"
	ActionRewrite = "rewrite"
	ActionRoute   = "route"
)
