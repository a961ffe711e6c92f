package guest

// This file holds what does not depend on WebAssembly: the registered
// handlers and the hook dispatch, from input bytes to output bytes. abi.go
// wraps it in the exports of the policy ABI (wasip1 only); Handle runs it
// natively, for guest/guesttest.

import (
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
	outBuf []byte

	// One request of each kind, reused: an instance runs one call at a
	// time, and a heap allocation per call costs more than the parse.
	toolCallReq       ToolCall
	toolResultReq     ToolResult
	resourceResultReq ResourceResult
	promptResultReq   PromptResult
	eventReq          Event
)

func hooksMask() uint32 {
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
	return m
}

// Handle runs the registered handler of a hook ("configure" or an ABI hook
// name such as "tool_call") on its input, as the hook's export does inside
// a module, and returns a copy of the output (nil: none; ok false: no such
// hook, or no handler registered for it). Modules never call it:
// guest/guesttest does, to run a module's handlers natively under go test.
func Handle(hook string, input []byte) (output []byte, ok bool) {
	h := hookIndex(hook)
	if hook != "configure" && (h < 0 || hooksMask()&(1<<h) == 0) {
		return nil, false
	}
	var out []byte
	switch h {
	case -1:
		out = configure(input)
	case abi.HookToolsList:
		out = toolsList(input)
	case abi.HookToolCall:
		out = toolCall(input)
	case abi.HookToolResult:
		out = resultHook(hook, input, toolResultFn, &toolResultReq)
	case abi.HookResourceResult:
		out = resultHook(hook, input, resourceResultFn, &resourceResultReq)
	case abi.HookPromptResult:
		out = resultHook(hook, input, promptResultFn, &promptResultReq)
	case abi.HookEvent:
		out = event(input)
	}
	if len(out) == 0 {
		return nil, true
	}
	return append([]byte(nil), out...), true
}

// hookIndex returns the number of the ABI hook named name, or -1.
func hookIndex(name string) int {
	for h := 0; h < abi.NumHooks; h++ {
		if abi.HookName(h) == name {
			return h
		}
	}
	return -1
}

func failOut(msg string) []byte {
	out := append(outBuf[:0], `{"error":`...)
	out = jsonlite.AppendString(out, msg)
	outBuf = append(out, '}')
	return outBuf
}

func badInputOut(hook string, err error) []byte {
	if err == nil {
		return failOut(hook + ": input was not written at the allocated address")
	}
	return failOut(hook + ": malformed input: " + err.Error())
}

func configure(in []byte) []byte {
	if configureFn == nil {
		return nil
	}
	if err := configureFn(in); err != nil {
		return failOut(err.Error())
	}
	return nil
}

func toolsList(in []byte) []byte {
	if toolsListFn == nil {
		return nil
	}
	req, err := parseToolsList(in)
	if err != nil {
		return badInputOut("tools_list", err)
	}
	toolsListFn(req)
	outBuf = req.appendOutput(outBuf[:0])
	return outBuf
}

func toolCall(in []byte) []byte {
	if toolCallFn == nil {
		return nil
	}
	req := &toolCallReq
	*req = ToolCall{}
	if err := req.parse(in); err != nil {
		return badInputOut("tool_call", err)
	}
	d := toolCallFn(req)
	outBuf = d.appendJSON(outBuf[:0])
	return outBuf
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
func resultHook[R any, P resultReq[R]](hook string, in []byte, fn func(P) error, req P) []byte {
	if fn == nil {
		return nil
	}
	var zero R
	*req = zero
	if err := req.parse(in); err != nil {
		return badInputOut(hook, err)
	}
	if err := fn(req); err != nil {
		return failOut(err.Error())
	}
	replaced, result := req.replacement()
	outBuf = appendResult(outBuf[:0], replaced, result)
	return outBuf
}

func event(in []byte) []byte {
	if eventFn == nil {
		return nil
	}
	ev := &eventReq
	*ev = Event{}
	if err := ev.parse(in); err != nil {
		return badInputOut("event", err)
	}
	eventFn(ev)
	return nil
}

func appendResult(dst []byte, replaced bool, result []byte) []byte {
	if !replaced {
		return dst
	}
	dst = append(dst, `{"result":`...)
	dst = append(dst, result...)
	return append(dst, '}')
}
