// Package intercept is edge-mcp's SEP-2624 interceptor chain: the types of
// the interceptor standard (descriptors, invocations, validation and
// mutation results, in their wire form), event matching, and the executor
// that runs one lifecycle event through a chain of interceptors.
//
// An interceptor is anything with a descriptor that can be invoked
// (Interceptor): a Go value, a Wasm module, an interceptor hosted by a
// remote MCP server. The chain does not care which.
//
// The execution model is the SEP's trust-boundary order:
//
//   - request phase (data leaving towards a server): mutators in sequence,
//     ordered by priorityHint for the phase then by name, then validators
//     concurrently;
//   - response phase (data coming back): validators concurrently, then
//     mutators in sequence.
//
// A validator that answers valid=false with severity "error" (or no
// severity) refuses the event; warnings and infos never block. An
// interceptor in mode "audit" never blocks and never changes the payload:
// an audit validator's refusal is reported, an audit mutator's output is
// computed and reported as a Shadow (before and after) without being
// applied. An interceptor that fails (error, panic, deadline, garbage or a
// result of the wrong type or shape) is skipped when it is failOpen and
// refuses the event otherwise (fail-closed is the default). Every refusal
// is one *Refusal error naming the interceptor and the reason.
//
// Registry serves interceptors/list and interceptor/invoke for a set of
// interceptors, in the SEP's wire shape.
package intercept
