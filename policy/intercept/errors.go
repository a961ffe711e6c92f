package intercept

import (
	"errors"
	"fmt"
	"strings"
)

// Failure kinds: why an interceptor produced no usable result.
var (
	ErrTimeout   = errors.New("deadline exceeded")
	ErrFailed    = errors.New("failed")
	ErrBadResult = errors.New("bad result")
	ErrPanic     = errors.New("panicked")
)

// FailError is an interceptor failure: Kind is one of the Err* sentinels.
type FailError struct {
	Interceptor string
	Kind        error
	Err         error
}

func (e *FailError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("interceptor %q %v", e.Interceptor, e.Kind)
	}
	return fmt.Sprintf("interceptor %q %v: %v", e.Interceptor, e.Kind, e.Err)
}

func (e *FailError) Unwrap() []error { return []error{e.Kind, e.Err} }

// Refusal is the error of a chain that refused an event: the interceptor
// that refused it (the first by name when several did), why, and the
// others that refused too.
type Refusal struct {
	Interceptor string
	Event       string
	Phase       Phase
	// Messages are the refusing validator's messages (empty on failure).
	Messages []Message
	// Failure is set when the interceptor failed and is fail-closed.
	Failure *FailError
	// Others names the other interceptors that refused the same event.
	Others []string
}

// Reason is why the event was refused, without the interceptor's name.
func (r *Refusal) Reason() string {
	if r.Failure != nil {
		msg := r.Failure.Kind.Error()
		if r.Failure.Err != nil {
			msg += ": " + r.Failure.Err.Error()
		}
		return msg + " (fail-closed)"
	}
	res := Result{Type: Validation, Messages: r.Messages}
	return res.Reason()
}

func (r *Refusal) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "interceptor %q refused %s (%s): %s", r.Interceptor, r.Event, r.Phase, r.Reason())
	if len(r.Others) > 0 {
		fmt.Fprintf(&b, " (also refused by %s)", strings.Join(quoteAll(r.Others), ", "))
	}
	return b.String()
}

func quoteAll(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = fmt.Sprintf("%q", n)
	}
	return out
}

// RPCError is a JSON-RPC error of interceptor/invoke or interceptors/list.
type RPCError struct {
	Code    int64
	Message string
}

// JSON-RPC error codes used by the interceptor methods.
const (
	CodeInvalidParams = -32602
	CodeInternalError = -32603
	CodeServerError   = -32000 // the SEP's timeout code
)

func (e *RPCError) Error() string { return fmt.Sprintf("%s (JSON-RPC %d)", e.Message, e.Code) }
