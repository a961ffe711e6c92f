package gateway

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// TestChain checks how chain composes stages: in the order given, the
// first outermost, and a stage that answers ends the call there.
func TestChain(t *testing.T) {
	t.Parallel()
	var ran []string
	pass := func(name string) Stage {
		return func(next Handler) Handler {
			return func(tc *toolCall) (json.RawMessage, *jsonrpc.Error) {
				ran = append(ran, name)
				return next(tc)
			}
		}
	}
	refuse := func(name string) Stage {
		return func(next Handler) Handler {
			return func(tc *toolCall) (json.RawMessage, *jsonrpc.Error) {
				ran = append(ran, name)
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: name}
			}
		}
	}
	last := func(tc *toolCall) (json.RawMessage, *jsonrpc.Error) {
		ran = append(ran, "forward")
		return json.RawMessage(`{}`), nil
	}
	tests := []struct {
		name    string
		stages  []Stage
		wantRan []string
		wantErr string
	}{
		{name: "no stage", wantRan: []string{"forward"}},
		{name: "in order", stages: []Stage{pass("a"), pass("b"), pass("c")}, wantRan: []string{"a", "b", "c", "forward"}},
		{name: "a refusal ends the call", stages: []Stage{pass("a"), refuse("b"), pass("c")}, wantRan: []string{"a", "b"}, wantErr: "b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ran = nil
			res, rerr := chain(last, tt.stages...)(&toolCall{})
			if !slices.Equal(ran, tt.wantRan) {
				t.Errorf("ran %v, want %v", ran, tt.wantRan)
			}
			switch {
			case tt.wantErr != "" && (rerr == nil || rerr.Message != tt.wantErr):
				t.Errorf("error %v, want %q", rerr, tt.wantErr)
			case tt.wantErr == "" && (rerr != nil || string(res) != `{}`):
				t.Errorf("answer %s, %v; want the last handler's", res, rerr)
			}
		})
	}
}
