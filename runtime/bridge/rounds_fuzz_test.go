package bridge

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/edge-mcp/edge-mcp/internal/wire"
)

// FuzzInputRequired: whatever a 2026-07-28 upstream sends as an
// input_required result, and whatever params the call had, decoding it
// and building the retry's params neither panics nor yields invalid JSON,
// and the retry carries the server's requestState unchanged.
func FuzzInputRequired(f *testing.F) {
	f.Add([]byte(`{"resultType":"input_required","inputRequests":{"user_name":{"method":"elicitation/create","params":{"message":"?"}}},"requestState":"s"}`),
		[]byte(`{"name":"t","arguments":{},"_meta":{"progressToken":3}}`))
	f.Add([]byte(`{"inputRequests":{},"requestState":{"x":[1,2]}}`), []byte(`{}`))
	f.Add([]byte(`{"inputRequests":{"a":{"method":""}}}`), []byte(`null`))
	f.Add([]byte(`[]`), []byte(`{"requestState":"old","inputResponses":{"a":1}}`))
	f.Fuzz(func(t *testing.T, result, params []byte) {
		ir, err := parseInputRequired(result)
		if err != nil {
			return
		}
		answers := map[string]json.RawMessage{}
		for key := range ir.InputRequests {
			answers[key] = json.RawMessage(`{"action":"accept"}`)
		}
		out, err := retryParams(params, answers, ir.RequestState)
		if err != nil {
			return
		}
		if !json.Valid(out) {
			t.Fatalf("retry params %q are not JSON", out)
		}
		state, ok, _ := wire.Field(out, "requestState")
		if len(ir.RequestState) > 0 && string(ir.RequestState) != "null" && (!ok || !jsonEqual(state, ir.RequestState)) {
			t.Fatalf("requestState %s became %s", ir.RequestState, state)
		}
		if tok, err := SetProgressToken(out, 7); err == nil && !json.Valid(tok) {
			t.Fatalf("params with the progress token %q are not JSON", tok)
		}
	})
}

// jsonEqual reports whether a and b are the same JSON value.
func jsonEqual(a, b []byte) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && reflect.DeepEqual(x, y)
}
