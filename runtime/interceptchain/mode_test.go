package interceptchain

import (
	"errors"
	"fmt"
	"testing"

	"github.com/edge-mcp/edge-mcp/policy/intercept"
)

// TestSetMode: an audit interceptor that would refuse lets the call
// through; promoted, the same call is refused at once (no reload), the
// listing says the mode is an override; demoted, it passes again.
func TestSetMode(t *testing.T) {
	url, _ := serve(t, "127.0.0.1:0", denyIf("pii/secret", "SECRET"))
	cfg := parse(t, fmt.Sprintf(`{
	  "interceptorServers": {"a": {"url": %q}},
	  "interceptors": [{"server": "a", "mode": "audit"}]
	}`, url))
	var changes int
	s := start(t, cfg, Options{OnChange: func(*intercept.Chain) { changes++ }})
	out, err := call(s, "x", "t", `{"v":"SECRET"}`)
	if err != nil || len(out.Audits) != 1 {
		t.Fatalf("audit mode: %v, %+v; want it to pass with one audit", err, out)
	}
	tests := []struct {
		name, ic string
		mode     intercept.Mode
		wantErr  error
		refused  bool
	}{
		{"promote", "pii/secret", intercept.Active, nil, true},
		{"promote again", "pii/secret", intercept.Active, ErrSameMode, true},
		{"unknown", "nope", intercept.Active, ErrNotInChain, true},
		{"demote", "pii/secret", intercept.Audit, nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := s.SetMode(tc.ic, tc.mode); !errors.Is(err, tc.wantErr) {
				t.Fatalf("SetMode: %v, want %v", err, tc.wantErr)
			}
			_, err := call(s, "x", "t", `{"v":"SECRET"}`)
			var ref *intercept.Refusal
			if got := errors.As(err, &ref); got != tc.refused {
				t.Fatalf("refused = %v (%v), want %v", got, err, tc.refused)
			}
			l := s.List().Interceptors
			if len(l) != 1 || !l[0].ModeOverride || l[0].Mode != string(s.Chain().Descriptors()[0].Mode) {
				t.Fatalf("listing %+v", l)
			}
		})
	}
	if changes != 2 {
		t.Errorf("OnChange called %d times, want 2", changes)
	}
	var nilSet *Set
	if _, err := nilSet.SetMode("pii/secret", intercept.Active); !errors.Is(err, ErrNoChain) {
		t.Errorf("nil Set: %v", err)
	}
}
