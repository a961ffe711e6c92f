//go:build wasip1

// The exports of the policy ABI; the rest of the SDK builds anywhere.

package guest

import (
	"runtime"
	"unsafe"

	"github.com/edge-mcp/edge-mcp/guest/abi"
)

// hookInterceptors is reported when the module declares interceptors
// (ABI 1.1, intercept.go): both of their exports are then present.
const hookInterceptors = 1<<abi.HookInterceptors | 1<<abi.HookIntercept

var inBuf []byte

//go:wasmexport edge_abi_version
func edgeABIVersion() uint32 { return ABIMajor<<16 | ABIMinor }

//go:wasmexport edge_hooks
func edgeHooks() uint32 {
	m := hooksMask()
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

// finish packs an output for the host and yields so the Go scheduler can
// run background GC work before control returns to the host (a reactor
// runs no goroutines between calls, and without this the heap grows until
// the memory limit is hit).
func finish(out []byte) uint64 {
	outBuf = out
	runtime.Gosched()
	if len(out) == 0 {
		return 0
	}
	return uint64(uintptr(unsafe.Pointer(unsafe.SliceData(out))))<<32 | uint64(len(out))
}

func fail(msg string) uint64 { return finish(failOut(msg)) }

func badInput(hook string, err error) uint64 { return finish(badInputOut(hook, err)) }

// export runs a dispatch function on the input at ptr.
func export(hook string, ptr, n uint32, fn func([]byte) []byte) uint64 {
	in, ok := input(ptr, n)
	if !ok {
		return badInput(hook, nil)
	}
	return finish(fn(in))
}

//go:wasmexport edge_configure
func edgeConfigure(ptr, n uint32) uint64 { return export("configure", ptr, n, configure) }

//go:wasmexport edge_hook_tools_list
func edgeHookToolsList(ptr, n uint32) uint64 { return export("tools_list", ptr, n, toolsList) }

//go:wasmexport edge_hook_tool_call
func edgeHookToolCall(ptr, n uint32) uint64 { return export("tool_call", ptr, n, toolCall) }

//go:wasmexport edge_hook_tool_result
func edgeHookToolResult(ptr, n uint32) uint64 {
	return export("tool_result", ptr, n, func(in []byte) []byte {
		return resultHook("tool_result", in, toolResultFn, &toolResultReq)
	})
}

//go:wasmexport edge_hook_resource_result
func edgeHookResourceResult(ptr, n uint32) uint64 {
	return export("resource_result", ptr, n, func(in []byte) []byte {
		return resultHook("resource_result", in, resourceResultFn, &resourceResultReq)
	})
}

//go:wasmexport edge_hook_prompt_result
func edgeHookPromptResult(ptr, n uint32) uint64 {
	return export("prompt_result", ptr, n, func(in []byte) []byte {
		return resultHook("prompt_result", in, promptResultFn, &promptResultReq)
	})
}

//go:wasmexport edge_hook_event
func edgeHookEvent(ptr, n uint32) uint64 { return export("event", ptr, n, event) }
