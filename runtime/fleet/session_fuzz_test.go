package fleet

import (
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/edge-mcp/edge-mcp/runtime/cluster"
)

// FuzzFleetSessionRecord: a session record read from NATS either decodes
// to a usable record (an id; a level, if any, that exists) or is refused;
// never a panic.
func FuzzFleetSessionRecord(f *testing.F) {
	f.Add([]byte(`{"id":"s","level":"debug"}`))
	f.Add([]byte(`{"id":"s","revoked":true,"owner":"r1"}`))
	f.Add([]byte(`{"id":"","level":"loudest"}`))
	f.Add([]byte(`[`))
	f.Fuzz(func(t *testing.T, b []byte) {
		rec, err := decodeRecord(b)
		if err != nil {
			return
		}
		if rec.ID == "" || (rec.Level != "" && !slices.Contains(logLevels, rec.Level)) {
			t.Fatalf("accepted %+v from %q", rec, b)
		}
	})
}

// FuzzFleetOutID: the id of a client's answer (chosen by the client)
// names a replica only when it has the form the gateway makes, and a
// made id comes back unchanged.
func FuzzFleetOutID(f *testing.F) {
	f.Add("3@" + cluster.Token("r1"))
	f.Add("@")
	f.Add("-1@zz")
	f.Add("1@" + strings.Repeat("0", 100))
	f.Fuzz(func(t *testing.T, s string) {
		id, err := jsonrpc.MakeID(s)
		if err != nil {
			return
		}
		n, replica, ok := splitOutID(id)
		if !ok {
			return
		}
		back, _ := jsonrpc.MakeID(strings.SplitN(s, "@", 2)[0] + "@" + cluster.Token(replica))
		if n2, r2, ok2 := splitOutID(back); !ok2 || n2 != n || r2 != replica {
			t.Fatalf("%q → (%d, %q) does not round-trip", s, n, replica)
		}
	})
}
