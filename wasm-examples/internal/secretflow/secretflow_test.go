package secretflow

import (
	"strings"
	"testing"
)

func TestFind(t *testing.T) {
	tests := []struct {
		in   string
		want []Hit
	}{
		{"VALUES ('AKIA5MZXN8QRF3WBY6OE')", []Hit{{"aws_access_key", "AKIA5MZXN8QRF3WBY6OE"}}},
		{"KEY=sk_live_4eC7aRm9Kx2bNw5pQj8sYd and ghp_Xa2bC3dEf4gH5iJk6Lm7nN8oP", []Hit{{"stripe_secret_live", "sk_live_4eC7aRm9Kx2bNw5pQj8sYd"}, {"github_pat", "ghp_Xa2bC3dEf4gH5iJk6Lm7nN8oP"}}},
		{"AKIA5MZXN8QRF3WBY6OEXX", []Hit{{"aws_access_key", "AKIA5MZXN8QRF3WBY6OE"}}},
		{"sk_live_short", nil},
		{"xoxb-17345628901-AbCdEfGhIjKlMnOp", []Hit{{"slack_bot", "xoxb-17345628901-AbCdEfGhIjKlMnOp"}}},
		{"nothing here", nil},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got := Find([]byte(tt.in), nil)
			if len(got) != len(tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Fatalf("got %v, want %v", got, tt.want)
				}
			}
		})
	}
}

// TestFindJSONDecodes: an escaped secret is still found.
func TestFindJSONDecodes(t *testing.T) {
	hits, err := FindJSON([]byte(`{"q":"\u0041KIA5MZXN8QRF3WBY6OE"}`))
	if err != nil || len(hits) != 1 || hits[0].Value != "AKIA5MZXN8QRF3WBY6OE" {
		t.Fatalf("hits %v, err %v", hits, err)
	}
}

func TestServerOf(t *testing.T) {
	tests := []struct{ event, payload, want string }{
		{"tools/call", `{"name":"read_file","arguments":{}}`, "filesystem"},
		{"tools/call", `{"name":"write_query"}`, "sqlite"},
		{"tools/call", `{"params":{"name":"custom_tool"}}`, "custom_tool"},
		{"resources/read", `{"uri":"https://example.com/a"}`, "example.com"},
		{"resources/read", `{"uri":"file:///etc/passwd"}`, "file"},
		{"sampling/createMessage", `{"messages":[]}`, "sampling"},
		{"", `{}`, "unknown"},
	}
	for _, tt := range tests {
		t.Run(tt.payload, func(t *testing.T) {
			if got := ServerOf(tt.event, []byte(tt.payload)); got != tt.want {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestGuard(t *testing.T) {
	secret := []Hit{{"aws_access_key", "AKIA5MZXN8QRF3WBY6OE"}}
	tests := []struct {
		name  string
		steps func(g *Guard) string
		deny  bool
	}{
		{"relay to another server", func(g *Guard) string {
			g.Check("s", "filesystem", nil)
			g.Ingest("s", "", secret)
			return g.Check("s", "sqlite", secret)
		}, true},
		{"write back to the same server", func(g *Guard) string {
			g.Check("s", "filesystem", nil)
			g.Ingest("s", "", secret)
			return g.Check("s", "filesystem", secret)
		}, false},
		{"no prior read", func(g *Guard) string { return g.Check("s", "sqlite", secret) }, false},
		{"other session", func(g *Guard) string {
			g.Check("a", "filesystem", nil)
			g.Ingest("a", "", secret)
			return g.Check("b", "sqlite", secret)
		}, false},
		{"explicit server wins over in-flight", func(g *Guard) string {
			g.Check("s", "sqlite", nil)
			g.Ingest("s", "filesystem", secret)
			return g.Check("s", "sqlite", secret)
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			why := tt.steps(NewGuard())
			if (why != "") != tt.deny {
				t.Fatalf("why = %q, want deny %v", why, tt.deny)
			}
			if tt.deny && !strings.Contains(why, "aws_access_key read from server 'filesystem'") {
				t.Fatalf("why = %q", why)
			}
		})
	}
}

func TestGuardBounded(t *testing.T) {
	g := NewGuard()
	for i := range MaxSessions + 10 {
		g.Check(strings.Repeat("x", i%7)+string(rune('a'+i%26))+strings.Repeat("y", i), "s", nil)
	}
	if g.Sessions() > MaxSessions {
		t.Fatalf("%d sessions", g.Sessions())
	}
}

func FuzzFind(f *testing.F) {
	f.Add([]byte(`{"a":"AKIA5MZXN8QRF3WBY6OE sk_live_4eC7aRm9Kx2bNw5pQj8sYd"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, h := range Find(b, nil) {
			if !strings.Contains(string(b), h.Value) {
				t.Fatalf("hit %q not in input", h.Value)
			}
		}
		_, _ = FindJSON(b)
		_ = ServerOf("tools/call", b)
	})
}

// TestGuardExportRestore: a session's memory exported as the host's
// session state and restored in another guard (another instance or
// replica) refuses the same flows; an empty state is an empty memory.
func TestGuardExportRestore(t *testing.T) {
	secret := []Hit{{Format: "aws_access_key", Value: "AKIA5MZXN8QRF3WBY6OE"}}
	g := NewGuard()
	g.Check("s", "files", nil)
	g.Ingest("s", "", secret)
	st := g.Export("s")
	h := NewGuard()
	if err := h.Restore("s", st); err != nil {
		t.Fatal(err)
	}
	if why := h.Check("s", "db", secret); !strings.Contains(why, "read from server 'files'") {
		t.Fatalf("restored guard: %q, want the refusal (state %s)", why, st)
	}
	if string(h.Export("s")) != `["files","AKIA5MZXN8QRF3WBY6OE aws_access_key files"]` {
		t.Fatalf("export %s", h.Export("s"))
	}
	e := NewGuard()
	if err := e.Restore("s", []byte(`{}`)); err != nil || e.Check("s", "db", secret) != "" {
		t.Fatalf("empty state: %v", err)
	}
}
