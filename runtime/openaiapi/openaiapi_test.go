package openaiapi

import (
	"encoding/json"
	"errors"
	"net/http"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// TestStatus checks the HTTP status and error type of each JSON-RPC
// answer of the gateway to a call.
func TestStatus(t *testing.T) {
	tests := []struct {
		name       string
		err        error
		wantStatus int
		wantType   string
	}{
		{"rate limited", &jsonrpc.Error{Code: codeRateLimited, Message: "slow down"}, http.StatusTooManyRequests, "rate_limit_error"},
		{"timeout", &jsonrpc.Error{Code: codeRequestTimeout, Message: "late"}, http.StatusGatewayTimeout, "timeout_error"},
		{"unknown tool", &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: `unknown tool "x"`}, http.StatusNotFound, "not_found_error"},
		{"server down", &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "down", Data: json.RawMessage(`{"reason":"server_unavailable"}`)}, http.StatusServiceUnavailable, "server_error"},
		{"pending approval", &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "wait", Data: json.RawMessage(`{"reason":"pending_approval"}`)}, http.StatusServiceUnavailable, "server_error"},
		{"bad arguments", &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "bad"}, http.StatusBadRequest, "invalid_request_error"},
		{"upstream failed", &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "boom"}, http.StatusBadGateway, "upstream_error"},
		{"not JSON-RPC", errors.New("broken pipe"), http.StatusBadGateway, "upstream_error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, typ, _ := apiStatus(tt.err)
			if status != tt.wantStatus || typ != tt.wantType {
				t.Errorf("got %d %s, want %d %s", status, typ, tt.wantStatus, tt.wantType)
			}
		})
	}
}

func TestRetryAfterValue(t *testing.T) {
	for raw, want := range map[string]string{`3`: "3", ` 12 `: "12", `-1`: "", `1.5`: "", `"3"`: "", ``: ""} {
		if got := retryAfterValue(json.RawMessage(raw)); got != want {
			t.Errorf("retryAfterValue(%q) = %q, want %q", raw, got, want)
		}
	}
}
