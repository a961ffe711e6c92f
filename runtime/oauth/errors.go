package oauth

import (
	"errors"
	"fmt"
)

// NeedsAuthorizationError is the error of a request to a server that has
// no usable token and whose authorization needs a person: first login,
// a refresh token that no longer works, a step-up. It names the server and
// says what an operator must do; it never carries a token.
type NeedsAuthorizationError struct {
	Server   string
	Identity string // "" for a shared server
	// Pending is set when an authorization URL is waiting for a person
	// (listed in /status and by `edge-mcp auth status`).
	Pending bool
	// Reason is why the last attempt failed, when one did.
	Reason string
}

func (e *NeedsAuthorizationError) Error() string {
	msg := fmt.Sprintf("server %q needs authorization: an operator must run `edge-mcp auth login %s`", e.Server, e.Server)
	if e.Identity != "" {
		msg = fmt.Sprintf("server %q needs authorization for %q: that user must complete the authorization", e.Server, e.Identity)
	}
	if e.Pending {
		msg += " (an authorization is pending: see `edge-mcp auth status`)"
	}
	if e.Reason != "" {
		msg += "; last attempt: " + e.Reason
	}
	return msg
}

// NotConfiguredError is the error of a server without an "oauth" section
// that answered 401 with a WWW-Authenticate challenge.
type NotConfiguredError struct {
	Server string
	// HadToken is set when the request carried a configured token
	// (bearer_token or an Authorization header), which was refused.
	HadToken bool
}

func (e *NotConfiguredError) Error() string {
	if e.HadToken {
		return fmt.Sprintf("server %q refused the configured token (HTTP 401 with WWW-Authenticate); fix bearer_token, or replace it with an \"oauth\" section and run `edge-mcp auth login %s`", e.Server, e.Server)
	}
	return fmt.Sprintf("server %q needs authorization (HTTP 401 with WWW-Authenticate): add \"oauth\": {} to its entry (or a pre-registered clientId) and run `edge-mcp auth login %s`", e.Server, e.Server)
}

// IsNeedsAuthorization reports whether err, or an error it wraps, says a
// server needs authorization (either kind above).
func IsNeedsAuthorization(err error) bool {
	var n *NeedsAuthorizationError
	var c *NotConfiguredError
	return errors.As(err, &n) || errors.As(err, &c)
}

// ErrUnknownServer is returned for a server without an "oauth" section.
var ErrUnknownServer = errors.New("no such server with an \"oauth\" section")
