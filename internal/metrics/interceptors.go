package metrics

import (
	"bytes"
	"time"
)

// InterceptorCounts are one interceptor chain member's counts.
type InterceptorCounts struct {
	Name                             string
	Calls, Denials, Failures, Audits int64
}

// InterceptorServer is one interceptor server's state.
type InterceptorServer struct {
	Name    string
	Reached bool
}

// InterceptorStats is what the metrics report of the interceptor chain.
type InterceptorStats struct {
	Servers      []InterceptorServer
	Interceptors []InterceptorCounts
}

// Interceptors makes the metrics report the interceptor chain: stats is
// called on each scrape and returns nil without a chain. Safe on a nil
// *Metrics; call it before Handler serves.
func (m *Metrics) Interceptors(stats func() *InterceptorStats) {
	if m != nil {
		m.interceptors = stats
	}
}

// InterceptorCall records the duration of one invocation of the named
// interceptor by the chain (intercept.Options.Observe); past maxSeries
// names, they share the OtherLabel series.
func (m *Metrics) InterceptorCall(interceptor string, d time.Duration) {
	if m == nil {
		return
	}
	m.interceptDuration.get(interceptor).observe(d.Seconds())
}

// writeInterceptors writes the interceptor chain's families.
func writeInterceptors(b *bytes.Buffer, st *InterceptorStats) {
	if st == nil {
		return
	}
	name := Namespace + "_interceptor_server_up"
	writeHeader(b, name, "Whether the interceptor server was reached (1) or is stood in for (0).", kindGauge)
	for _, s := range st.Servers {
		v := 0.0
		if s.Reached {
			v = 1
		}
		writeSample(b, name, `server="`+escapeLabel(s.Name)+`"`, v)
	}
	families := []struct {
		name, help string
		value      func(InterceptorCounts) int64
	}{
		{"interceptor_calls_total", "Invocations of an interceptor by the gateway's chain, by interceptor.", func(c InterceptorCounts) int64 { return c.Calls }},
		{"interceptor_denials_total", "Events an interceptor refused (active validators), by interceptor.", func(c InterceptorCounts) int64 { return c.Denials }},
		{"interceptor_failures_total", "Invocations that failed (error, deadline, bad result), by interceptor.", func(c InterceptorCounts) int64 { return c.Failures }},
		{"interceptor_audits_total", "Refusals and changes of audit-mode interceptors, reported and not applied, by interceptor.", func(c InterceptorCounts) int64 { return c.Audits }},
	}
	for _, f := range families {
		name := Namespace + "_" + f.name
		writeHeader(b, name, f.help, kindCounter)
		for _, c := range st.Interceptors {
			writeSample(b, name, `interceptor="`+escapeLabel(c.Name)+`"`, float64(f.value(c)))
		}
	}
}
