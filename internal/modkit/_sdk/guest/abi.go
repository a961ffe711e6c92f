//go:build wasip1

// Package guest is the SDK for writing edge-mcp policy modules in Go.
//
// A module is a main package with an empty main function whose init
// function registers typed handlers:
//
//	func init() {
//		guest.OnConfigure(func(cfg []byte) error { ... })
//		guest.OnToolCall(func(c *guest.ToolCall) guest.Decision {
//			if c.Tool == "delete_repo" {
//				return guest.Deny("deleting repositories is not allowed")
//			}
//			return guest.Allow()
//		})
//	}
//
//	func main() {}
//
// Build it as a WASI reactor:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o policy.wasm .
//
// Handlers must be registered from init: a reactor never runs main. The SDK
// provides every export of the policy ABI (policy/ABI.md in the edge-mcp
// repository): the version, the input allocator, the per-hook entry points
// and the hook bitmask that tells the host which handlers exist, so the host
// calls only those. Handler inputs are slices into a buffer the SDK reuses;
// copy anything that must outlive the call.
package guest

import (
	"runtime"
	"unsafe"

	"github.com/edge-mcp/edge-mcp/guest/abi"
	"github.com/edge-mcp/edge-mcp/guest/jsonlite"
)

// ABI version implemented by this SDK.
const (
	ABIMajor = abi.Major
	ABIMinor = abi.Minor
)

// Hook bits as reported by edge_hooks. The export names below must be
// literals; guest/abi's tests check them against the names it defines.
const (
	hookToolsList      = 1 << abi.HookToolsList
	hookToolCall       = 1 << abi.HookToolCall
	hookToolResult     = 1 << abi.HookToolResult
	hookResourceResult = 1 << abi.HookResourceResult
	hookPromptResult   = 1 << abi.HookPromptResult
	hookEvent          = 1 << abi.HookEvent
	hookInterceptors   = 1<<abi.HookInterceptors | 1<<abi.HookIntercept
)

var (
	configureFn      func([]byte) error
	toolsListFn      func(*ToolsList)
	toolCallFn       func(*ToolCall) Decision
	toolResultFn     func(*ToolResult) error
	resourceResultFn func(*ResourceResult) error
	promptResultFn   func(*PromptResult) error
	eventFn          func(*Event)
)

// OnConfigure registers the handler that receives the module's config JSON
// (the "config" object of its attachment, or {} when there is none) once per
// instance before any hook runs. Returning an error fails the module load.
func OnConfigure(fn func(config []byte) error) { configureFn = fn }

// OnToolsList registers the tools/list filter.
func OnToolsList(fn func(*ToolsList)) { toolsListFn = fn }

// OnToolCall registers the pre-call decision handler.
func OnToolCall(fn func(*ToolCall) Decision) { toolCallFn = fn }

// OnToolResult registers the tool result rewriter. Returning an error makes
// the call fail; the host applies the attachment's on_error policy.
func OnToolResult(fn func(*ToolResult) error) { toolResultFn = fn }

// OnResourceResult registers the resources/read result rewriter.
func OnResourceResult(fn func(*ResourceResult) error) { resourceResultFn = fn }

// OnPromptResult registers the prompts/get result rewriter.
func OnPromptResult(fn func(*PromptResult) error) { promptResultFn = fn }

// OnEvent registers the event observer.
func OnEvent(fn func(*Event)) { eventFn = fn }

var (
	inBuf  []byte
	outBuf []byte

	// One request of each kind, reused: an instance runs one call at a
	// time, and a heap allocation per call costs more than the parse.
	toolCallReq       ToolCall
	toolResultReq     ToolResult
	resourceResultReq ResourceResult
	promptResultReq   PromptResult
	eventReq          Event
)

//go:wasmexport edge_abi_version
func edgeABIVersion() uint32 { return ABIMajor<<16 | ABIMinor }

//go:wasmexport edge_hooks
func edgeHooks() uint32 {
	var m uint32
	if toolsListFn != nil {
		m |= hookToolsList
	}
	if toolCallFn != nil {
		m |= hookToolCall
	}
	if toolResultFn != nil {
		m |= hookToolResult
	}
	if resourceResultFn != nil {
		m |= hookResourceResult
	}
	if promptResultFn != nil {
		m |= hookPromptResult
	}
	if eventFn != nil {
		m |= hookEvent
	}
	if len(interceptors) > 0 {
		m |= hookInterceptors
	}
	return m
}

//go:wasmexport edge_alloc
func edgeAlloc(size uint32) uint32 {
	if int(size) > cap(inBuf) || cap(inBuf) == 0 {
		n := (int(size) + 4095) &^ 4095
		if n == 0 {
			n = 4096
		}
		inBuf = make([]byte, n)
	}
	inBuf = inBuf[:cap(inBuf)]
	return uint32(uintptr(unsafe.Pointer(unsafe.SliceData(inBuf))))
}

// input returns the host-written input, checking that the host wrote where
// edge_alloc told it to.
func input(ptr, n uint32) ([]byte, bool) {
	if len(inBuf) == 0 || ptr != uint32(uintptr(unsafe.Pointer(unsafe.SliceData(inBuf)))) || int(n) > len(inBuf) {
		return nil, false
	}
	return inBuf[:n], true
}

// finish packs outBuf for the host and yields so the Go scheduler can run
// background GC work before control returns to the host (a reactor runs no
// goroutines between calls, and without this the heap grows until the
// memory limit is hit).
func finish(out []byte) uint64 {
	outBuf = out
	runtime.Gosched()
	if len(out) == 0 {
		return 0
	}
	return uint64(uintptr(unsafe.Pointer(unsafe.SliceData(out))))<<32 | uint64(len(out))
}

func fail(msg string) uint64 {
	out := append(outBuf[:0], `{"error":`...)
	out = jsonlite.AppendString(out, msg)
	return finish(append(out, '}'))
}

func badInput(hook string, err error) uint64 {
	if err == nil {
		return fail(hook + ": input was not written at the allocated address")
	}
	return fail(hook + ": malformed input: " + err.Error())
}

//go:wasmexport edge_configure
func edgeConfigure(ptr, n uint32) uint64 {
	in, ok := input(ptr, n)
	if !ok {
		return badInput("configure", nil)
	}
	if configureFn == nil {
		return finish(nil)
	}
	if err := configureFn(in); err != nil {
		return fail(err.Error())
	}
	return finish(nil)
}

//go:wasmexport edge_hook_tools_list
func edgeHookToolsList(ptr, n uint32) uint64 {
	in, ok := input(ptr, n)
	if !ok {
		return badInput("tools_list", nil)
	}
	if toolsListFn == nil {
		return finish(nil)
	}
	req, err := parseToolsList(in)
	if err != nil {
		return badInput("tools_list", err)
	}
	toolsListFn(req)
	return finish(req.appendOutput(outBuf[:0]))
}

//go:wasmexport edge_hook_tool_call
func edgeHookToolCall(ptr, n uint32) uint64 {
	in, ok := input(ptr, n)
	if !ok {
		return badInput("tool_call", nil)
	}
	if toolCallFn == nil {
		return finish(nil)
	}
	req := &toolCallReq
	*req = ToolCall{}
	if err := req.parse(in); err != nil {
		return badInput("tool_call", err)
	}
	d := toolCallFn(req)
	return finish(d.appendJSON(outBuf[:0]))
}

//go:wasmexport edge_hook_tool_result
func edgeHookToolResult(ptr, n uint32) uint64 {
	return resultHook("tool_result", ptr, n, toolResultFn, &toolResultReq)
}

//go:wasmexport edge_hook_resource_result
func edgeHookResourceResult(ptr, n uint32) uint64 {
	return resultHook("resource_result", ptr, n, resourceResultFn, &resourceResultReq)
}

//go:wasmexport edge_hook_prompt_result
func edgeHookPromptResult(ptr, n uint32) uint64 {
	return resultHook("prompt_result", ptr, n, promptResultFn, &promptResultReq)
}

// resultReq is what the three result hooks have in common: a request that
// decodes its input and may carry a replacement result.
type resultReq[R any] interface {
	*R
	parse(in []byte) error
	replacement() (replaced bool, result []byte)
}

// resultHook runs one result hook: the input decoded into req (reset
// first), fn called, its replacement (if any) answered.
func resultHook[R any, P resultReq[R]](hook string, ptr, n uint32, fn func(P) error, req P) uint64 {
	in, ok := input(ptr, n)
	if !ok {
		return badInput(hook, nil)
	}
	if fn == nil {
		return finish(nil)
	}
	var zero R
	*req = zero
	if err := req.parse(in); err != nil {
		return badInput(hook, err)
	}
	if err := fn(req); err != nil {
		return fail(err.Error())
	}
	replaced, result := req.replacement()
	return finish(appendResult(outBuf[:0], replaced, result))
}

//go:wasmexport edge_hook_event
func edgeHookEvent(ptr, n uint32) uint64 {
	in, ok := input(ptr, n)
	if !ok {
		return badInput("event", nil)
	}
	if eventFn == nil {
		return finish(nil)
	}
	ev := &eventReq
	*ev = Event{}
	if err := ev.parse(in); err != nil {
		return badInput("event", err)
	}
	eventFn(ev)
	return finish(nil)
}

func appendResult(dst []byte, replaced bool, result []byte) []byte {
	if !replaced {
		return dst
	}
	dst = append(dst, `{"result":`...)
	dst = append(dst, result...)
	return append(dst, '}')
}
