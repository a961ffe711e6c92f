package gateway

import (
	"encoding/json"
	"testing"

	"github.com/edge-mcp/edge-mcp/internal/wire"
)

// FuzzRewriteMeta: the params of any forwarded request either pass with
// the progress token mapped and the per-connection keys gone, or are
// rejected; never a panic, never invalid JSON out.
func FuzzRewriteMeta(f *testing.F) {
	f.Add(`{"name":"x","arguments":{}}`)
	f.Add(`{"name":"x","_meta":{"progressToken":"tok","io.modelcontextprotocol/clientInfo":{}}}`)
	f.Add(`{"_meta":{"progressToken":7}}`)
	f.Add(`{"_meta":null}`)
	f.Add(`{"_meta":[1]}`)
	f.Add(`[]`)
	f.Fuzz(func(t *testing.T, params string) {
		if !json.Valid([]byte(params)) {
			return
		}
		s := &session{}
		c := &call{}
		out, err := s.rewriteMeta(json.RawMessage(params), c, 99)
		if err != nil {
			return
		}
		if !json.Valid(out) {
			t.Fatalf("rewriteMeta(%s) = %s: invalid JSON", params, out)
		}
		meta, ok, _ := wire.Field(out, "_meta")
		if !ok {
			return
		}
		for _, k := range connectionMetaKeys {
			if _, ok, _ := wire.Field(meta, k); ok {
				t.Fatalf("per-connection key %s survived: %s", k, out)
			}
		}
		if c.progressToken != nil {
			if tok, _, _ := wire.Field(meta, "progressToken"); string(tok) != "99" {
				t.Fatalf("progress token not mapped: %s", out)
			}
		}
	})
}
