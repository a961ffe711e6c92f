package policy

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every failed hook call returns a *CallError that wraps
// exactly one of these, so callers can test the cause with errors.Is.
var (
	// ErrTimeout: the guest ran past the module's timeout.
	ErrTimeout = errors.New("policy module exceeded its deadline")
	// ErrMemoryLimit: the guest hit the module's memory cap.
	ErrMemoryLimit = errors.New("policy module hit its memory limit")
	// ErrTrap: the guest trapped or exited (unreachable, out-of-bounds
	// access, a Go panic, proc_exit).
	ErrTrap = errors.New("policy module trapped")
	// ErrBadOutput: the guest returned output the host cannot accept
	// (out-of-bounds pointer, invalid JSON, wrong shape, unknown action).
	ErrBadOutput = errors.New("policy module returned invalid output")
	// ErrOutputTooLarge: the guest's output exceeded ModuleOptions.MaxOutput.
	ErrOutputTooLarge = errors.New("policy module output too large")
	// ErrInputTooLarge: the hook input exceeded ModuleOptions.MaxInput.
	ErrInputTooLarge = errors.New("policy hook input too large")
	// ErrGuest: the guest reported an error ({"error":"..."}).
	ErrGuest = errors.New("policy module reported an error")
	// ErrBusy: no instance became free within ModuleOptions.MaxWait.
	ErrBusy = errors.New("policy module busy")
	// ErrUnhealthy: the module failed too often in a row and is resting.
	ErrUnhealthy = errors.New("policy module unhealthy")
	// ErrClosed: the module was closed.
	ErrClosed = errors.New("policy module closed")
	// ErrCanceled: the caller's context ended during the call.
	ErrCanceled = errors.New("policy call canceled")
)

// CallError describes a failed hook call.
type CallError struct {
	Module string // attachment/module name
	Hook   string // hook name, "configure" or "init"
	Kind   error  // one of the sentinel errors above
	Err    error  // detail, may be nil
}

func (e *CallError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("policy %q %s: %v", e.Module, e.Hook, e.Kind)
	}
	return fmt.Sprintf("policy %q %s: %v: %v", e.Module, e.Hook, e.Kind, e.Err)
}

// Unwrap exposes both the kind and the detail to errors.Is and errors.As.
func (e *CallError) Unwrap() []error {
	if e.Err == nil {
		return []error{e.Kind}
	}
	return []error{e.Kind, e.Err}
}

// DeniedError is returned by Chain.ResourceResult and Chain.PromptResult
// when a module failure with on_error "deny" withholds a result.
type DeniedError struct {
	Module string
	Reason string
}

func (e *DeniedError) Error() string {
	return fmt.Sprintf("denied by policy %q: %s", e.Module, e.Reason)
}
