package metrics

import (
	"testing"

	"github.com/edge-mcp/edge-mcp/internal/budget"
)

// TestClientMemory: the client-memory budget's figures are exposed per
// store, read from the pool at each scrape.
func TestClientMemory(t *testing.T) {
	pool := budget.New(1000, 400)
	acct := pool.Acquire("a", true)
	defer acct.Release()
	acct.Charge(budget.Resumption, 300)
	acct.Charge(budget.InputRounds, 200) // over the share: refused
	acct.Refused(budget.InputRounds)
	acct.Dropped(budget.Resumption, 2)
	m := New()
	m.ClientMemory(pool.Stats)
	f := scrape(t, m.Handler())
	tests := []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{Namespace + "_client_memory_limit_bytes", map[string]string{}, 1000},
		{Namespace + "_client_memory_identity_limit_bytes", map[string]string{}, 400},
		{Namespace + "_client_memory_bytes", map[string]string{"store": "resumption"}, 300},
		{Namespace + "_client_memory_bytes", map[string]string{"store": "input_rounds"}, 0},
		{Namespace + "_client_memory_dropped_total", map[string]string{"store": "resumption"}, 2},
		{Namespace + "_client_memory_refused_total", map[string]string{"store": "input_rounds"}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := value(t, f, tt.name, tt.labels); got != tt.want {
				t.Errorf("%s%v = %v, want %v", tt.name, tt.labels, got, tt.want)
			}
		})
	}
	if f := scrape(t, New().Handler()); f[Namespace+"_client_memory_bytes"] != nil {
		t.Error("client memory exposed without a pool")
	}
}
