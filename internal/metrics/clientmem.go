package metrics

import (
	"bytes"

	"github.com/edge-mcp/edge-mcp/internal/budget"
)

// ClientMemory makes the metrics report the client-memory budget: stats
// is called on each scrape. Safe on a nil *Metrics; call it before
// Handler serves.
func (m *Metrics) ClientMemory(stats func() *budget.Stats) {
	if m != nil {
		m.clientMem = stats
	}
}

// writeClientMemory writes the client-memory budget's families.
func writeClientMemory(b *bytes.Buffer, st *budget.Stats) {
	if st == nil {
		return
	}
	name := Namespace + "_client_memory_limit_bytes"
	writeHeader(b, name, "Bytes clients may make the gateway hold for them in all (limits.client_memory).", kindGauge)
	writeSample(b, name, "", float64(st.Limit))
	name = Namespace + "_client_memory_identity_limit_bytes"
	writeHeader(b, name, "Bytes one authenticated identity may hold of them (limits.client_memory_per_identity).", kindGauge)
	writeSample(b, name, "", float64(st.PerIdentity))
	families := []struct {
		name, help, kind string
		value            func(budget.StoreStats) int64
	}{
		{"client_memory_bytes", "Bytes clients make the gateway hold for them, by store.", kindGauge,
			func(s budget.StoreStats) int64 { return s.Used }},
		{"client_memory_dropped_total", "Items given up to make room in the client-memory budget (the oldest resumable events), by store.", kindCounter,
			func(s budget.StoreStats) int64 { return s.Dropped }},
		{"client_memory_refused_total", "Items refused over the client-memory budget (events not kept; input_required rounds, per_client sessions and streams refused), by store.", kindCounter,
			func(s budget.StoreStats) int64 { return s.Refused }},
	}
	for _, f := range families {
		name := Namespace + "_" + f.name
		writeHeader(b, name, f.help, f.kind)
		for _, s := range st.Stores {
			writeSample(b, name, `store="`+escapeLabel(s.Store)+`"`, float64(f.value(s)))
		}
	}
}
