package policy

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every failed hook call returns a *CallError that wraps
// exactly one of the call sentinels (ErrTimeout to ErrCanceled), and every
// module that Load or Verify refuses a *LoadError that wraps one of the
// load sentinels (ErrCompile to ErrTestVector) when the module itself is at
// fault, so callers can test the cause with errors.Is.
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
	// ErrForbiddenCall: an Extism plugin called a kernel function it may
	// not (http_request without allowed_hosts, a var past max_var_bytes,
	// memory outside its blocks); the error names the function.
	ErrForbiddenCall = errors.New("policy module called a host function it may not")
	// ErrBusy: no instance became free within ModuleOptions.MaxWait.
	ErrBusy = errors.New("policy module busy")
	// ErrUnhealthy: the module failed too often in a row and is resting.
	ErrUnhealthy = errors.New("policy module unhealthy")
	// ErrClosed: the module was closed.
	ErrClosed = errors.New("policy module closed")
	// ErrCanceled: the caller's context ended during the call.
	ErrCanceled = errors.New("policy call canceled")

	// ErrCompile: the module is not a WebAssembly binary or does not
	// compile (malformed, invalid, or using unsupported features).
	ErrCompile = errors.New("policy module does not compile")
	// ErrABIVersion: edge_abi_version reports a version this host does not
	// support (another major, or a newer minor).
	ErrABIVersion = errors.New("policy module speaks an unsupported ABI version")
	// ErrMissingExport: a required export (memory, edge_abi_version,
	// edge_alloc, at least one hook) is missing or has the wrong signature.
	ErrMissingExport = errors.New("policy module lacks a required export")
	// ErrForbiddenImport: the module imports something beyond the WASI
	// functions a policy module is granted.
	ErrForbiddenImport = errors.New("policy module imports something it may not")
	// ErrInstantiate: the module compiled but could not be started
	// (instantiation, _initialize, edge_abi_version or edge_hooks trapped).
	ErrInstantiate = errors.New("policy module failed to start")
	// ErrInitTimeout: an instance did not finish starting (instantiation
	// with the module's start function, _initialize, edge_abi_version,
	// edge_hooks, edge_configure) within ModuleOptions.InitTimeout.
	ErrInitTimeout = errors.New("policy module did not start in time")
	// ErrConfigure: edge_configure rejected the config, trapped, or the
	// config is not a JSON object.
	ErrConfigure = errors.New("policy module rejected its configuration")
	// ErrTestVector: the module loaded but gave an unexpected answer to
	// one of its test vectors (see Module.RunVectors and Engine.Verify).
	ErrTestVector = errors.New("policy test vector failed")
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

// LoadError describes a module that Load or Verify refused. Kind tells the
// stage that failed; Err says exactly what is wrong (which export, which
// import, what the guest said).
type LoadError struct {
	Module string // the name the module was loaded under
	// Kind is one of ErrCompile, ErrABIVersion, ErrMissingExport,
	// ErrForbiddenImport, ErrInstantiate, ErrInitTimeout, ErrConfigure and
	// ErrTestVector,
	// or nil when the module is not at fault (invalid options, a closed
	// engine, a canceled context).
	Kind error
	Err  error
}

func (e *LoadError) Error() string {
	if e.Kind == ErrTestVector {
		return fmt.Sprintf("verifying policy %q: %v", e.Module, e.Err)
	}
	return fmt.Sprintf("loading policy %q: %v", e.Module, e.Err)
}

// Unwrap exposes both the kind and the detail to errors.Is and errors.As.
func (e *LoadError) Unwrap() []error {
	if e.Kind == nil {
		return []error{e.Err}
	}
	return []error{e.Kind, e.Err}
}

// stageError tags a load failure with its kind while it travels up to Load,
// which turns it into a *LoadError. Its message is the detail alone.
type stageError struct{ kind, err error }

func (e *stageError) Error() string   { return e.err.Error() }
func (e *stageError) Unwrap() []error { return []error{e.kind, e.err} }

// staged tags err with a load failure kind.
func staged(kind, err error) error { return &stageError{kind, err} }

// newLoadError wraps a failure of Load for module name, taking the kind
// from the outermost stage tag (the first errors.As finds).
func newLoadError(name string, err error) *LoadError {
	le := &LoadError{Module: name, Err: err}
	var se *stageError
	if errors.As(err, &se) {
		le.Kind = se.kind
	}
	return le
}
