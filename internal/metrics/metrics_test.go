package metrics

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// scrape fetches the handler over a real HTTP server and parses the text
// exposition.
func scrape(t *testing.T, h http.Handler) map[string]*tfamily {
	t.Helper()
	srv := httptest.NewServer(h)
	defer srv.Close()
	req, err := http.NewRequest(http.MethodGet, srv.URL+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/plain; version=0.0.4")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatalf("scraping: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape status = %d", resp.StatusCode)
	}
	if ct := resp.Header.Get("Content-Type"); ct != contentType {
		t.Errorf("Content-Type = %q, want %q", ct, contentType)
	}
	families, err := parseText(resp.Body)
	if err != nil {
		t.Fatalf("parsing exposition: %v", err)
	}
	return families
}

// find returns the metric of family name whose labels include all of want,
// or nil.
func find(families map[string]*tfamily, name string, want map[string]string) *tmetric {
	mf := families[name]
	if mf == nil {
		return nil
	}
next:
	for _, m := range mf.metrics {
		have := m.labels
		if len(have) != len(want) {
			continue
		}
		for k, v := range want {
			if have[k] != v {
				continue next
			}
		}
		return m
	}
	return nil
}

func value(t *testing.T, families map[string]*tfamily, name string, labels map[string]string) float64 {
	t.Helper()
	m := find(families, name, labels)
	if m == nil {
		t.Fatalf("no series %s%v in scrape", name, labels)
	}
	if typ := families[name].typ; m.hist != nil || typ != "counter" && typ != "gauge" {
		t.Fatalf("series %s%v is not a counter or gauge", name, labels)
	}
	return m.value
}

func TestScrapeAfterCalls(t *testing.T) {
	m := New()
	m.ToolCall("fs", "read_file", OutcomeOK, 3*time.Millisecond)
	m.ToolCall("fs", "read_file", OutcomeOK, 40*time.Millisecond)
	m.ToolCall("fs", "read_file", OutcomeDenied, time.Millisecond)
	m.ToolCall("fs", "write_file", "something-new", 2*time.Second)
	m.UpstreamUp("fs", true)
	m.UpstreamUp("git", true)
	m.UpstreamUp("git", false)
	m.UpstreamReconnect("git")
	m.UpstreamReconnect("git")
	m.PolicyDecision("pii", "before_call", "allow", 20*time.Microsecond)
	m.PolicyDecision("pii", "before_call", "deny", 2*time.Millisecond)
	m.PolicyFailure("pii", "trap")
	m.SessionOpened("http")
	m.SessionOpened("http")
	m.SessionClosed("http")
	m.SessionOpened("stdio")
	m.RateLimited(ScopeClient)
	m.RateLimited(ScopeTool)
	m.RateLimited(ScopeTool)
	m.AuthFailure("bad_token")
	m.Request("tools/call")
	m.Request("tools/call")
	m.Request("x-vendor/secret-method")

	f := scrape(t, m.Handler())
	tests := []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"edge_mcp_tool_calls_total", map[string]string{"server": "fs", "tool": "read_file", "outcome": "ok"}, 2},
		{"edge_mcp_tool_calls_total", map[string]string{"server": "fs", "tool": "read_file", "outcome": "denied"}, 1},
		{"edge_mcp_tool_calls_total", map[string]string{"server": "fs", "tool": "write_file", "outcome": OtherLabel}, 1},
		{"edge_mcp_upstream_up", map[string]string{"server": "fs"}, 1},
		{"edge_mcp_upstream_up", map[string]string{"server": "git"}, 0},
		{"edge_mcp_upstream_reconnects_total", map[string]string{"server": "git"}, 2},
		{"edge_mcp_policy_decisions_total", map[string]string{"module": "pii", "hook": "before_call", "decision": "allow"}, 1},
		{"edge_mcp_policy_decisions_total", map[string]string{"module": "pii", "hook": "before_call", "decision": "deny"}, 1},
		{"edge_mcp_policy_failures_total", map[string]string{"module": "pii", "reason": "trap"}, 1},
		{"edge_mcp_sessions_active", map[string]string{"transport": "http"}, 1},
		{"edge_mcp_sessions_active", map[string]string{"transport": "stdio"}, 1},
		{"edge_mcp_rate_limited_total", map[string]string{"scope": "client"}, 1},
		{"edge_mcp_rate_limited_total", map[string]string{"scope": "tool"}, 2},
		{"edge_mcp_auth_failures_total", map[string]string{"reason": "bad_token"}, 1},
		{"edge_mcp_requests_total", map[string]string{"method": "tools/call"}, 2},
		{"edge_mcp_requests_total", map[string]string{"method": OtherLabel}, 1},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s%v", tt.name, tt.labels), func(t *testing.T) {
			if got := value(t, f, tt.name, tt.labels); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}

	t.Run("tool duration histogram", func(t *testing.T) {
		h := histogramOf(find(f, "edge_mcp_tool_call_duration_seconds", map[string]string{"server": "fs", "tool": "read_file"}))
		if h == nil {
			t.Fatal("no histogram for fs/read_file")
		}
		if h.count != 3 {
			t.Errorf("sample count = %v, want 3", h.count)
		}
		if got, want := h.sum, 0.044; got < want-1e-9 || got > want+1e-9 {
			t.Errorf("sample sum = %v, want %v", got, want)
		}
		b := h.buckets
		if b[0].le != 0.001 || b[len(b)-1].le != 60 {
			t.Errorf("buckets span %v..%v, want 0.001..60", b[0].le, b[len(b)-1].le)
		}
		for _, bk := range b {
			if bk.le == 0.005 && bk.cum != 2 {
				t.Errorf("le=0.005 count = %v, want 2", bk.cum)
			}
		}
	})
	t.Run("policy duration histogram", func(t *testing.T) {
		h := histogramOf(find(f, "edge_mcp_policy_duration_seconds", map[string]string{"module": "pii", "hook": "before_call"}))
		if h == nil {
			t.Fatal("no policy histogram")
		}
		b := h.buckets
		if h.count != 2 || b[0].le != 0.00001 || b[len(b)-1].le != 1 {
			t.Errorf("count=%v buckets %v..%v", h.count, b[0].le, b[len(b)-1].le)
		}
		for _, bk := range b {
			if bk.le == 0.000025 && bk.cum != 1 {
				t.Errorf("le=25µs count = %v, want 1", bk.cum)
			}
		}
	})
	t.Run("runtime collectors", func(t *testing.T) {
		for _, name := range []string{"go_goroutines", "process_cpu_seconds_total"} {
			if f[name] == nil {
				t.Errorf("missing %s", name)
			}
		}
	})
}

// histogramOf returns m's histogram, nil if m is nil.
func histogramOf(m *tmetric) *thist {
	if m == nil {
		return nil
	}
	return m.hist
}

func TestSeparateRegistries(t *testing.T) {
	a, b := New(), New()
	a.AuthFailure("x")
	if find(scrape(t, b.Handler()), "edge_mcp_auth_failures_total", map[string]string{"reason": "x"}) != nil {
		t.Fatal("metrics recorded on one Metrics appear on another")
	}
}

func TestNilReceiver(t *testing.T) {
	var m *Metrics
	m.ToolCall("s", "t", OutcomeOK, time.Second)
	m.UpstreamUp("s", true)
	m.UpstreamReconnect("s")
	m.PolicyDecision("m", "h", "allow", time.Second)
	m.PolicyFailure("m", "r")
	m.SessionOpened("http")
	m.SessionClosed("http")
	m.RateLimited(ScopeClient)
	m.AuthFailure("r")
	m.Request("ping")
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusNotFound {
		t.Fatalf("nil Handler status = %d, want 404", rec.Code)
	}
}

func TestToolNameCap(t *testing.T) {
	m := New()
	for i := range MaxToolNames {
		m.ToolCall("s", fmt.Sprintf("tool-%d", i), OutcomeOK, time.Millisecond)
	}
	// A known tool on another server still gets its own series.
	m.ToolCall("s2", "tool-0", OutcomeOK, time.Millisecond)
	// New names beyond the cap collapse into "other", concurrently.
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 50 {
				m.ToolCall("s", fmt.Sprintf("overflow-%d-%d", g, i), OutcomeError, time.Millisecond)
			}
		})
	}
	wg.Wait()
	// Known names keep their own series after the cap.
	m.ToolCall("s", "tool-7", OutcomeOK, time.Millisecond)

	f := scrape(t, m.Handler())
	tools := map[string]bool{}
	for _, mt := range f["edge_mcp_tool_calls_total"].metrics {
		tools[mt.labels["tool"]] = true
	}
	if len(tools) != MaxToolNames+1 {
		t.Errorf("distinct tool label values = %d, want %d", len(tools), MaxToolNames+1)
	}
	if got := value(t, f, "edge_mcp_tool_calls_total", map[string]string{"server": "s", "tool": OtherLabel, "outcome": "error"}); got != 200 {
		t.Errorf("other = %v, want 200", got)
	}
	if got := value(t, f, "edge_mcp_tool_calls_total", map[string]string{"server": "s", "tool": "tool-7", "outcome": "ok"}); got != 2 {
		t.Errorf("tool-7 = %v, want 2", got)
	}
	if got := value(t, f, "edge_mcp_tool_calls_total", map[string]string{"server": "s2", "tool": "tool-0", "outcome": "ok"}); got != 1 {
		t.Errorf("s2/tool-0 = %v, want 1", got)
	}
	if find(f, "edge_mcp_tool_calls_total", map[string]string{"server": "s", "tool": "overflow-0-0", "outcome": "error"}) != nil {
		t.Error("overflow tool name has its own series")
	}
}

func TestSeriesCap(t *testing.T) {
	m := New()
	for i := range maxSeries + 10 {
		m.AuthFailure(fmt.Sprintf("reason-%d", i))
	}
	f := scrape(t, m.Handler())
	if n := len(f["edge_mcp_auth_failures_total"].metrics); n != maxSeries+1 {
		t.Errorf("series = %d, want %d", n, maxSeries+1)
	}
	if got := value(t, f, "edge_mcp_auth_failures_total", map[string]string{"reason": OtherLabel}); got != 10 {
		t.Errorf("other = %v, want 10", got)
	}
}

func BenchmarkToolCall(b *testing.B) {
	m := New()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			m.ToolCall("filesystem", "read_file", OutcomeOK, 12*time.Millisecond)
		}
	})
}

func BenchmarkToolCallNil(b *testing.B) {
	var m *Metrics
	b.ReportAllocs()
	for b.Loop() {
		m.ToolCall("filesystem", "read_file", OutcomeOK, 12*time.Millisecond)
	}
}

func ExampleMetrics() {
	m := New()
	m.ToolCall("filesystem", "read_file", OutcomeOK, 15*time.Millisecond)
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", m.Handler())
	// Output:
}

// TestInterceptorDuration: each interceptor's invocations land in its
// own histogram series, in the right buckets; past maxSeries names they
// share the OtherLabel series; a nil Metrics records nothing.
func TestInterceptorDuration(t *testing.T) {
	var off *Metrics
	off.InterceptorCall("x", time.Millisecond)
	m := New()
	m.InterceptorCall("pii/deny", 3*time.Millisecond)
	m.InterceptorCall("pii/deny", 40*time.Microsecond)
	m.InterceptorCall("security/guard", 7*time.Microsecond)
	for i := range maxSeries + 5 {
		m.InterceptorCall(fmt.Sprintf("many/%d", i), time.Millisecond)
	}
	f := scrape(t, m.Handler())
	if typ := f["edge_mcp_interceptor_duration_seconds"].typ; typ != "histogram" {
		t.Fatalf("type %q", typ)
	}
	h := find(f, "edge_mcp_interceptor_duration_seconds", map[string]string{"interceptor": "pii/deny"})
	if h == nil || h.hist == nil || h.hist.count != 2 {
		t.Fatalf("pii/deny %+v", h)
	}
	for _, b := range h.hist.buckets {
		want := map[bool]float64{true: 0, false: 1}[b.le < 0.00004]
		if b.le >= 0.003 {
			want = 2
		}
		if b.cum != want {
			t.Errorf("pii/deny bucket le=%v: %v, want %v", b.le, b.cum, want)
		}
	}
	if n := len(f["edge_mcp_interceptor_duration_seconds"].metrics); n != maxSeries+1 {
		t.Errorf("series = %d, want %d (the cap, then other)", n, maxSeries+1)
	}
	if o := find(f, "edge_mcp_interceptor_duration_seconds", map[string]string{"interceptor": OtherLabel}); o == nil || o.hist.count != 7 {
		t.Errorf("other %+v, want the 7 names past the cap", o)
	}
}
