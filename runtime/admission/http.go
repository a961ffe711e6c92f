package admission

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/edge-mcp/edge-mcp/internal/auth"
	"github.com/edge-mcp/edge-mcp/internal/wire"
)

// This file is the HTTP side of admission: who a request is, how an
// authentication failure is counted, and the HTTP 429 of a tools/call
// refused before the transport reads it. Pure functions of the request
// and response they are given, safe for concurrent use.

// Anonymous is the identity of clients when authentication is off.
var Anonymous = auth.Identity{Name: auth.AnonymousName, Method: auth.ModeNone}

// IdentityOf returns the identity an HTTP request was authenticated as.
func IdentityOf(r *http.Request) auth.Identity {
	if id, ok := auth.FromContext(r.Context()); ok {
		return id
	}
	return Anonymous
}

// AuthReason is the metrics reason of a 401 with the WWW-Authenticate
// challenge.
func AuthReason(challenge string) string {
	if bytes.Contains([]byte(challenge), []byte("invalid_token")) {
		return "invalid_token"
	}
	return "missing_credentials"
}

// StatusWriter remembers the status code of a response.
type StatusWriter struct {
	http.ResponseWriter
	Status int
}

func (w *StatusWriter) WriteHeader(code int) {
	if w.Status == 0 {
		w.Status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *StatusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// BearerToken is the token of r's Authorization header.
func BearerToken(r *http.Request) string {
	h := r.Header.Get("Authorization")
	if len(h) > 7 && strings.EqualFold(h[:7], "Bearer ") {
		return strings.TrimSpace(h[7:])
	}
	return ""
}

// ToolCall reads r's body (within limit bytes) and puts it back; when it
// is a tools/call it returns the body and the tool's name (false: the
// transport answers it, an error included: 400, 413).
func ToolCall(r *http.Request, limit int64) (body []byte, name string, ok bool) {
	body, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	r.Body.Close()
	r.Body = io.NopCloser(bytes.NewReader(body))
	if err != nil || int64(len(body)) > limit {
		return nil, "", false
	}
	if m, _ := wire.String(body, "method"); m != "tools/call" {
		return nil, "", false
	}
	params, _, _ := wire.Field(body, "params")
	name, _ = wire.String(params, "name")
	return body, name, true
}

// WriteRateLimited answers the JSON-RPC request body with HTTP 429,
// Retry-After, and the error code with rl's scope and wait in its data.
func WriteRateLimited(w http.ResponseWriter, body []byte, rl *RateLimited, code int64) {
	rawID, _, _ := wire.Field(body, "id")
	if len(rawID) == 0 {
		rawID = json.RawMessage("null")
	}
	data, _ := json.Marshal(map[string]any{"retryAfter": RetryAfterSeconds(rl.RetryAfter), "scope": rl.Scope})
	resp, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   jsonrpc.Error   `json:"error"`
	}{"2.0", rawID, jsonrpc.Error{Code: code, Message: rl.Error(), Data: data}})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Retry-After", strconv.Itoa(RetryAfterSeconds(rl.RetryAfter)))
	w.WriteHeader(http.StatusTooManyRequests)
	w.Write(resp)
}
