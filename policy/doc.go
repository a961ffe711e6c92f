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
//     running one call at a time under a deadline and size limits, all of
//     them within one memory cap (see Limits). A failing instance is
//     discarded and replaced; repeated failures mark the module unhealthy.
//   - Chain applies an ordered list of attachments (a module plus tool and
//     server globs and an on_error policy) to one hook: ToolsList,
//     ToolCall, ToolResult, ResourceResult, PromptResult and Event. Tools
//     that no attachment matches cost one map lookup.
//
// # Interceptors
//
// A module of ABI 1.1 can declare SEP-2624 interceptors (validators and
// mutators hooked on MCP lifecycle events); Module.Interceptors returns
// them as policy/intercept Interceptors, to run in an intercept.Chain with
// interceptors from anywhere else. Module.LegacyInterceptors maps the ABI
// 1.0 hooks tool_call, tool_result, resource_result and prompt_result onto
// interceptors the same way (ABI.md has the mapping).
//
// # Checking modules before they go live
//
// Load refuses a bad module with a *LoadError whose Kind names the stage
// that failed (ErrCompile, ErrABIVersion, ErrMissingExport,
// ErrForbiddenImport, ErrInstantiate, ErrInitTimeout, ErrConfigure), so an
// upload can be answered precisely. A module can ship with test vectors: hook inputs as
// ABI.md defines them and the outcome expected (TestVector, read with
// ParseTestVectors). Module.Decide runs one hook on a raw input and reports
// the host's normalized reading of the answer; Module.RunVectors checks a
// list of vectors; Engine.Verify loads a module and runs its vectors,
// returning the module only when every vector passes. EngineConfig.Recorder
// captures real hook inputs, which are valid vector inputs; RedactInput
// strips secrets from them before they are stored.
//
// # Shadow mode
//
// An attachment in shadow mode (Attachment.Shadow, Spec.Mode "shadow")
// never changes an outcome. The chain computes the enforced outcome as if
// the shadow attachment were absent; then, on a goroutine, the shadow
// module gets the input the chain received (the call or result as it
// arrived, the catalogue before any filtering) and its outcome, its
// on_error included, is compared with the enforced one: the action, the
// arguments (as JSON values) and the route target of a call, the result of
// a result hook, the exposed tools of a catalogue. Differences are logged
// at Info with both outcomes, agreements at Debug, and both are counted in
// Stats (ShadowRuns, ShadowDiffs). A module has at most
// ModuleOptions.MaxShadowPending shadow runs in flight; more are skipped
// and counted (ShadowSkipped). Chain.Close and Module.Close wait for the
// shadow runs in flight. Hooks includes the shadow modules' hooks, so a
// chain whose only module is a shadow is still called.
//
// # Limits
//
// Every module runs under these limits (ModuleOptions; Spec fields in
// brackets):
//
//   - Deadline per call: Timeout [timeout_ms], default 50 ms. A hook still
//     running at its deadline is stopped wherever it is (loops, memory.grow,
//     its start function) and fails with ErrTimeout; the instance is
//     replaced.
//   - Fuel: metering (the default) counts loop iterations inline; every
//     8192 iterations, and before every memory.grow, the host checks the
//     deadline, the caller's context and whether the module or engine is
//     closing. Fuel is not a budget of its own: it bounds how long a guest
//     runs between two checks (tens of microseconds). With
//     EngineConfig.CloseOnContextDone, wazero checks at every loop header
//     instead.
//   - Memory per module: MemoryMB [memory_mb], default 64 MiB, counts the
//     linear memory of all the module's instances together, not per
//     instance: each instance's memory is allocated against one budget, and
//     a memory.grow past it fails, which fails the call with
//     ErrMemoryLimit (Stats.Memory and Stats.MemoryHighWater show the
//     total). One budget rather than MemoryMB / PoolSize per instance
//     because Go guests need a few MiB each just to start, and a busy
//     instance may use more than its share while the others idle; the sum
//     is what the operator pays for. A pool whose instances cannot all
//     start within the budget fails Load (ErrInstantiate wrapping
//     ErrMemoryLimit). An instance past three quarters of MemoryMB is
//     replaced after its call (memory never shrinks).
//   - Instantiation deadline: InitTimeout, default 1 s, for starting each
//     instance: instantiation with the module's start function,
//     _initialize, edge_abi_version, edge_hooks and edge_configure, under
//     the same metering. Load refuses a module whose instance does not start
//     in time with a *LoadError of kind ErrInitTimeout; a replacement
//     instance that does not start fails the call that needed it
//     (ErrTimeout).
//   - Sizes: MaxInput and MaxOutput, 4 MiB each (ErrInputTooLarge,
//     ErrOutputTooLarge).
//   - Closing: Module.Close and Engine.Close stop guests still running or
//     starting (those calls and loads fail with ErrClosed) and return
//     without waiting for any deadline.
//
// A failed call is a *CallError whose Kind is one of the call sentinels;
// the attachment's on_error decides what the client sees.
//
// Modules never see gateway credentials and cannot reach files or the
// network: the only imports allowed are a fixed list of WASI preview1
// functions, backed by an empty sandbox. A policy decides; it never sends:
// this package imports neither the runtime nor the transports.
package policy
