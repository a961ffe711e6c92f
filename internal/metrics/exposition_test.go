package metrics

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestExpositionText(t *testing.T) {
	m := New()
	m.UpstreamUp("a\"b\\c\nd", true)
	m.AuthFailure("bad\xffutf8")
	m.PolicyDecision("pii", "before_call", "allow", 30*time.Microsecond)
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	body := rec.Body.String()
	for _, want := range []string{
		"# HELP edge_mcp_upstream_up Whether the gateway is connected to the upstream server (1) or not (0).\n# TYPE edge_mcp_upstream_up gauge\n",
		`edge_mcp_upstream_up{server="a\"b\\c\nd"} 1` + "\n",
		`edge_mcp_auth_failures_total{reason="bad` + "\uFFFD" + `utf8"} 1` + "\n",
		// Labels are sorted by name; le comes last; 1e-05 is Go's shortest form.
		`edge_mcp_policy_duration_seconds_bucket{hook="before_call",module="pii",le="1e-05"} 0` + "\n",
		`edge_mcp_policy_duration_seconds_bucket{hook="before_call",module="pii",le="5e-05"} 1` + "\n",
		`edge_mcp_policy_duration_seconds_bucket{hook="before_call",module="pii",le="+Inf"} 1` + "\n",
		`edge_mcp_policy_duration_seconds_count{hook="before_call",module="pii"} 1` + "\n",
		`go_info{version="go`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("exposition lacks %q", want)
		}
	}
	// Metrics without series are left out.
	if strings.Contains(body, "edge_mcp_tool_calls_total") {
		t.Error("tool_calls_total written without any call")
	}
	if _, err := parseText(strings.NewReader(body)); err != nil {
		t.Errorf("parsing: %v", err)
	}
}

func TestHandlerMethods(t *testing.T) {
	h := New().Handler()
	tests := []struct {
		method   string
		code     int
		wantBody bool
	}{
		{http.MethodGet, http.StatusOK, true},
		{http.MethodHead, http.StatusOK, false},
		{http.MethodPost, http.StatusMethodNotAllowed, true},
	}
	for _, tt := range tests {
		t.Run(tt.method, func(t *testing.T) {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(tt.method, "/metrics", nil))
			body, _ := io.ReadAll(rec.Body)
			if rec.Code != tt.code || (len(body) > 0) != tt.wantBody {
				t.Errorf("%s: %d with %d bytes, want %d (body %v)", tt.method, rec.Code, len(body), tt.code, tt.wantBody)
			}
		})
	}
}

func TestProcessMetrics(t *testing.T) {
	f := scrape(t, New().Handler())
	for _, name := range []string{"process_resident_memory_bytes", "process_start_time_seconds", "process_open_fds", "go_goroutines", "go_memstats_sys_bytes"} {
		t.Run(name, func(t *testing.T) {
			if f[name] == nil {
				t.Skip("not available here") // /proc missing: not Linux
			}
			if v := value(t, f, name, map[string]string{}); v <= 0 {
				t.Errorf("%s = %v, want > 0", name, v)
			}
		})
	}
	if start := f["process_start_time_seconds"]; start != nil {
		v := value(t, f, "process_start_time_seconds", map[string]string{})
		if d := time.Since(time.Unix(int64(v), 0)); d < -time.Minute || d > 24*time.Hour {
			t.Errorf("process start %v ago", d)
		}
	}
}

// TestRacingFirstCalls: goroutines racing to record a new tool's first
// call create one series, not one each (the parser refuses repeats).
func TestRacingFirstCalls(t *testing.T) {
	m := New()
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range 8 {
		wg.Go(func() {
			<-start
			m.ToolCall("s", "t", OutcomeOK, time.Millisecond)
			m.PolicyFailure("mod", "trap")
		})
	}
	close(start)
	wg.Wait()
	f := scrape(t, m.Handler())
	if got := value(t, f, "edge_mcp_tool_calls_total", map[string]string{"server": "s", "tool": "t", "outcome": "ok"}); got != 8 {
		t.Errorf("calls = %v, want 8", got)
	}
	if got := histogramOf(find(f, "edge_mcp_tool_call_duration_seconds", map[string]string{"server": "s", "tool": "t"})); got == nil || got.count != 8 {
		t.Errorf("duration histogram = %+v, want count 8", got)
	}
}
