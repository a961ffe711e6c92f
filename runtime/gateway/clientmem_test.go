package gateway

import (
	"slices"
	"testing"

	"github.com/edge-mcp/edge-mcp/internal/auth"
	"github.com/edge-mcp/edge-mcp/runtime/config"
)

// TestClientMemoryConfig: the configured budget and share are the pool's;
// a share of 0 is a quarter of the total; an authenticated identity is
// held to the share, the anonymous one to the total only; a changed
// budget is reported as needing a restart.
func TestClientMemoryConfig(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name               string
		limits             config.Limits
		wantTotal, wantPer int64
	}{
		{"both set", config.Limits{ClientMemory: 1 << 20, ClientMemoryPerIdentity: 1 << 18}, 1 << 20, 1 << 18},
		{"share derived", config.Limits{ClientMemory: 1 << 20}, 1 << 20, 1 << 18},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pool := clientMemory(tt.limits)
			st := pool.Stats()
			if st.Limit != tt.wantTotal || st.PerIdentity != tt.wantPer {
				t.Fatalf("pool %d, share %d; want %d and %d", st.Limit, st.PerIdentity, tt.wantTotal, tt.wantPer)
			}
			user := pool.Acquire("u", budgetShared(auth.Identity{Name: "u", Method: auth.ModeAPIKey}))
			anon := pool.Acquire(anonymous.Name, budgetShared(anonymous))
			defer user.Release()
			defer anon.Release()
			if user.Limit() != tt.wantPer || anon.Limit() != tt.wantTotal {
				t.Errorf("limits: identity %d, anonymous %d; want %d and %d", user.Limit(), anon.Limit(), tt.wantPer, tt.wantTotal)
			}
		})
	}
	old := &config.Config{Limits: config.Limits{ClientMemory: 1 << 20}}
	cfg := &config.Config{Limits: config.Limits{ClientMemory: 2 << 20}}
	if got := restartNeeded(old, cfg); !slices.Contains(got, "limits.client_memory/limits.client_memory_per_identity") {
		t.Errorf("restart needed for %v, want the client memory named", got)
	}
}
