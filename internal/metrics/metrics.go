// Package metrics holds the gateway's Prometheus metrics.
//
// A *Metrics owns its own set of metrics (there is no global registry),
// exposes typed helpers for every event the gateway records and serves them
// in the Prometheus text exposition format (version 0.0.4) with Handler,
// together with a few Go runtime and process metrics. Every method is safe
// on a nil *Metrics, which means "metrics off" and costs a nil check;
// nothing is allocated until New is called.
//
// Label values that come from outside the gateway are bounded: tool names are
// capped at MaxToolNames distinct values (later ones are reported as
// OtherLabel), JSON-RPC method names outside the MCP method set are reported
// as OtherLabel, and every other label combination is capped per metric.
package metrics

import (
	"net/http"

	"github.com/edge-mcp/edge-mcp/internal/budget"
	"sync"
	"sync/atomic"
	"time"
)

// Namespace is the prefix of every gateway metric name.
const Namespace = "edge_mcp"

// OtherLabel replaces a label value once the cardinality cap is reached or
// when the value is outside a known set.
const OtherLabel = "other"

// MaxToolNames is the number of distinct tool names that get their own
// label value; further tool names are reported as OtherLabel.
const MaxToolNames = 2000

// maxSeries caps the number of label combinations of every metric other than
// the per-tool ones; beyond it all labels are reported as OtherLabel.
const maxSeries = 1000

// Tool call outcomes, the values of the outcome label of tool_calls_total.
// Any other outcome string is reported as OtherLabel.
const (
	OutcomeOK               = "ok"
	OutcomeError            = "error"
	OutcomeDenied           = "denied"
	OutcomeTimeout          = "timeout"
	OutcomeRateLimited      = "rate_limited"
	OutcomeInvalidArguments = "invalid_arguments"
	OutcomeUnavailable      = "unavailable"
)

// Rate-limit scopes, the values of the scope label of rate_limited_total.
const (
	ScopeClient = "client"
	ScopeTool   = "tool"
)

// outcomes lists the outcome label values; the index is the outcome's slot in
// toolSeries.calls and the last slot is OtherLabel.
var outcomes = [...]string{
	OutcomeOK, OutcomeError, OutcomeDenied, OutcomeTimeout,
	OutcomeRateLimited, OutcomeInvalidArguments, OutcomeUnavailable,
	OtherLabel,
}

// Histogram buckets, in seconds.
var (
	toolCallBuckets = []float64{
		0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
		1, 2.5, 5, 10, 30, 60,
	}
	policyBuckets = []float64{
		0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005,
		0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,
	}
	// interceptorBuckets span a Wasm validator's microseconds to a
	// remote interceptor's deadline (2 s by default).
	interceptorBuckets = []float64{
		0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005,
		0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5,
	}
)

// mcpMethodNames are the JSON-RPC methods that get their own value of the
// method label of requests_total. New indexes them, so a gateway without
// metrics builds no map.
var mcpMethodNames = [...]string{
	"initialize", "ping",
	"tools/list", "tools/call",
	"resources/list", "resources/read", "resources/templates/list",
	"resources/subscribe", "resources/unsubscribe",
	"prompts/list", "prompts/get",
	"completion/complete", "logging/setLevel",
	"roots/list", "sampling/createMessage", "elicitation/create",
	"tasks/get", "tasks/list", "tasks/result", "tasks/cancel",
	"notifications/initialized", "notifications/cancelled",
	"notifications/progress", "notifications/message",
	"notifications/roots/list_changed",
	"notifications/tools/list_changed",
	"notifications/resources/list_changed",
	"notifications/resources/updated",
	"notifications/prompts/list_changed",
	"notifications/tasks/status",
	"notifications/elicitation/complete",
}

// Metrics is the gateway's set of Prometheus metrics. Create it with New; a
// nil *Metrics disables metrics and all its methods are no-ops.
type Metrics struct {
	families   []*family // in exposition order
	mcpMethods map[string]struct{}

	toolCalls    *family
	toolDuration *family
	tools        toolCache

	upstreamUp         *series[string, *gauge]
	upstreamNeedsAuth  *series[string, *gauge]
	upstreamReconnects *series[string, *counter]
	policyDecisions    *series[[3]string, *counter]
	policyDuration     *series[[2]string, *histogram]
	policyFailures     *series[[2]string, *counter]
	sessionsActive     *series[string, *gauge]
	rateLimited        *series[string, *counter]
	authFailures       *series[string, *counter]
	requests           *series[string, *counter]
	toolsListFailures  *series[string, *counter]
	interceptDuration  *series[string, *histogram]
	clientMem          func() *budget.Stats     // set by ClientMemory
	interceptors       func() *InterceptorStats // set by Interceptors
}

// New returns a Metrics with every gateway metric; Handler also serves the
// Go runtime and process metrics.
func New() *Metrics {
	m := &Metrics{mcpMethods: make(map[string]struct{}, len(mcpMethodNames))}
	for _, name := range mcpMethodNames {
		m.mcpMethods[name] = struct{}{}
	}
	add := func(kind, name, help string, buckets []float64, labels ...string) *family {
		f := newFamily(kind, Namespace+"_"+name, help, buckets, labels...)
		m.families = append(m.families, f)
		return f
	}
	counters := func(name, help, label string) *series[string, *counter] {
		f := add(kindCounter, name, help, nil, label)
		return newSeries(func(v string) *counter { return f.counter(v) }, OtherLabel)
	}
	gauges := func(name, help, label string) *series[string, *gauge] {
		f := add(kindGauge, name, help, nil, label)
		return newSeries(func(v string) *gauge { return f.gauge(v) }, OtherLabel)
	}

	m.toolCalls = add(kindCounter, "tool_calls_total", "Tool calls handled by the gateway, by upstream server, tool and outcome.", nil, "server", "tool", "outcome")
	m.toolDuration = add(kindHistogram, "tool_call_duration_seconds", "Duration of tool calls, by upstream server and tool.", toolCallBuckets, "server", "tool")
	m.tools.init()

	m.upstreamUp = gauges("upstream_up", "Whether the gateway is connected to the upstream server (1) or not (0).", "server")
	m.upstreamNeedsAuth = gauges("upstream_needs_authorization", "Whether the upstream server waits for an operator to authorize the gateway (OAuth), 1 or 0.", "server")
	m.upstreamReconnects = counters("upstream_reconnects_total", "Reconnections to upstream servers.", "server")

	decisions := add(kindCounter, "policy_decisions_total", "Policy decisions, by module, hook and decision.", nil, "module", "hook", "decision")
	m.policyDecisions = newSeries(func(k [3]string) *counter { return decisions.counter(k[:]...) },
		[3]string{OtherLabel, OtherLabel, OtherLabel})
	policyDuration := add(kindHistogram, "policy_duration_seconds", "Duration of policy hook evaluations, by module and hook.", policyBuckets, "module", "hook")
	m.policyDuration = newSeries(func(k [2]string) *histogram { return policyDuration.histogram(k[:]...) },
		[2]string{OtherLabel, OtherLabel})
	failures := add(kindCounter, "policy_failures_total", "Policy evaluations that failed, by module and reason.", nil, "module", "reason")
	m.policyFailures = newSeries(func(k [2]string) *counter { return failures.counter(k[:]...) },
		[2]string{OtherLabel, OtherLabel})

	m.sessionsActive = gauges("sessions_active", "Client sessions currently open, by transport.", "transport")
	m.rateLimited = counters("rate_limited_total", "Requests rejected by a rate limit, by scope (client or tool).", "scope")
	m.authFailures = counters("auth_failures_total", "Failed client authentications, by reason.", "reason")
	m.requests = counters("requests_total", "JSON-RPC requests and notifications received from clients, by method.", "method")
	m.toolsListFailures = counters("tools_list_failures_total",
		"Session tools lists built while a tools_list policy failed, by what the session got (kept_last_good or on_error).", "outcome")
	interceptDuration := add(kindHistogram, "interceptor_duration_seconds",
		"Duration of interceptor invocations by the gateway's chain (failures and timeouts included), by interceptor.", interceptorBuckets, "interceptor")
	m.interceptDuration = newSeries(func(k string) *histogram { return interceptDuration.histogram(k) }, OtherLabel)
	return m
}

// Handler returns an http.Handler serving the metrics in the Prometheus
// text exposition format. On a nil *Metrics it returns a handler that
// answers 404 Not Found.
func (m *Metrics) Handler() http.Handler {
	if m == nil {
		return http.NotFoundHandler()
	}
	return http.HandlerFunc(m.serveHTTP)
}

// ToolCall records one tool call on server with the given outcome (one of
// the Outcome constants) and duration.
func (m *Metrics) ToolCall(server, tool, outcome string, d time.Duration) {
	if m == nil {
		return
	}
	s := m.tools.get(server, tool, m.toolDuration)
	s.observe(m.toolCalls, outcomeIndex(outcome), d)
}

// UpstreamUp records whether the gateway is connected to server.
func (m *Metrics) UpstreamUp(server string, up bool) {
	if m == nil {
		return
	}
	var v int64
	if up {
		v = 1
	}
	m.upstreamUp.get(server).set(v)
}

// UpstreamNeedsAuthorization records whether server waits for an
// operator to authorize the gateway.
func (m *Metrics) UpstreamNeedsAuthorization(server string, needs bool) {
	if m == nil {
		return
	}
	var v int64
	if needs {
		v = 1
	}
	m.upstreamNeedsAuth.get(server).set(v)
}

// UpstreamReconnect records one reconnection to server.
func (m *Metrics) UpstreamReconnect(server string) {
	if m == nil {
		return
	}
	m.upstreamReconnects.get(server).inc()
}

// PolicyDecision records one decision of a policy module's hook and how long
// the evaluation took.
func (m *Metrics) PolicyDecision(module, hook, decision string, d time.Duration) {
	if m == nil {
		return
	}
	m.policyDecisions.get([3]string{module, hook, decision}).inc()
	m.policyDuration.get([2]string{module, hook}).observe(d.Seconds())
}

// PolicyFailure records one failed evaluation of a policy module.
func (m *Metrics) PolicyFailure(module, reason string) {
	if m == nil {
		return
	}
	m.policyFailures.get([2]string{module, reason}).inc()
}

// SessionOpened records a client session opened over transport.
func (m *Metrics) SessionOpened(transport string) {
	if m == nil {
		return
	}
	m.sessionsActive.get(transport).inc()
}

// SessionClosed records a client session over transport being closed.
func (m *Metrics) SessionClosed(transport string) {
	if m == nil {
		return
	}
	m.sessionsActive.get(transport).dec()
}

// RateLimited records one request rejected by a rate limit of the given
// scope (ScopeClient or ScopeTool).
func (m *Metrics) RateLimited(scope string) {
	if m == nil {
		return
	}
	m.rateLimited.get(scope).inc()
}

// AuthFailure records one failed client authentication.
func (m *Metrics) AuthFailure(reason string) {
	if m == nil {
		return
	}
	m.authFailures.get(reason).inc()
}

// Request records one JSON-RPC request or notification received from a
// client. Methods outside the MCP method set are reported as OtherLabel.
func (m *Metrics) Request(method string) {
	if m == nil {
		return
	}
	if _, ok := m.mcpMethods[method]; !ok {
		method = OtherLabel
	}
	m.requests.get(method).inc()
}

func outcomeIndex(outcome string) int {
	for i, o := range outcomes[:len(outcomes)-1] {
		if o == outcome {
			return i
		}
	}
	return len(outcomes) - 1
}

// toolSeries caches the children of the per-tool metrics of one
// (server, tool) pair so that ToolCall does not hash label values.
type toolSeries struct {
	server, tool string
	duration     *histogram
	mu           sync.Mutex // serialises the creation of calls children
	calls        [len(outcomes)]atomic.Pointer[counter]
}

func (s *toolSeries) observe(calls *family, outcome int, d time.Duration) {
	c := s.calls[outcome].Load()
	if c == nil {
		s.mu.Lock()
		if c = s.calls[outcome].Load(); c == nil {
			c = calls.counter(s.server, s.tool, outcomes[outcome])
			s.calls[outcome].Store(c)
		}
		s.mu.Unlock()
	}
	c.inc()
	s.duration.observe(d.Seconds())
}

type toolKey struct{ server, tool string }

// toolCache maps (server, tool) pairs to their series and enforces the
// MaxToolNames cap on distinct tool names.
type toolCache struct {
	mu     sync.RWMutex
	series map[toolKey]*toolSeries
	names  map[string]struct{}
}

func (c *toolCache) init() {
	c.series = make(map[toolKey]*toolSeries)
	c.names = make(map[string]struct{})
}

func (c *toolCache) get(server, tool string, durations *family) *toolSeries {
	k := toolKey{server, tool}
	c.mu.RLock()
	s, ok := c.series[k]
	if !ok {
		if _, known := c.names[tool]; !known && len(c.names) >= MaxToolNames {
			k.tool = OtherLabel
			s, ok = c.series[k]
		}
	}
	c.mu.RUnlock()
	if ok {
		return s
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	if s, ok := c.series[k]; ok {
		return s
	}
	if k.tool != OtherLabel {
		if _, known := c.names[k.tool]; !known {
			if len(c.names) >= MaxToolNames {
				k.tool = OtherLabel
				if s, ok := c.series[k]; ok {
					return s
				}
			} else {
				c.names[k.tool] = struct{}{}
			}
		}
	}
	s = &toolSeries{server: k.server, tool: k.tool, duration: durations.histogram(k.server, k.tool)}
	c.series[k] = s
	return s
}

// series caches the children of one metric vector by label values, capped
// at maxSeries label combinations; further combinations share the child of
// the overflow key.
type series[K comparable, V any] struct {
	mu       sync.RWMutex
	m        map[K]V
	newChild func(K) V
	overflow K
}

func newSeries[K comparable, V any](newChild func(K) V, overflow K) *series[K, V] {
	return &series[K, V]{m: make(map[K]V), newChild: newChild, overflow: overflow}
}

func (s *series[K, V]) get(k K) V {
	s.mu.RLock()
	v, ok := s.m[k]
	if !ok && len(s.m) >= maxSeries {
		v, ok = s.m[s.overflow]
	}
	s.mu.RUnlock()
	if ok {
		return v
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if v, ok := s.m[k]; ok {
		return v
	}
	if len(s.m) >= maxSeries {
		k = s.overflow
		if v, ok := s.m[k]; ok {
			return v
		}
	}
	v = s.newChild(k)
	s.m[k] = v
	return v
}

// Outcomes of a tools list built while a tools_list policy failed, the
// values of the outcome label of tools_list_failures_total.
const (
	ToolsListKeptLastGood = "kept_last_good" // the session kept its last good list
	ToolsListOnError      = "on_error"       // no good list yet: each module's on_error applied
)

// ToolsListFailure records a session tools list built while a tools_list
// policy failed, and what the session got instead (a ToolsList constant).
func (m *Metrics) ToolsListFailure(outcome string) {
	if m == nil {
		return
	}
	m.toolsListFailures.get(outcome).inc()
}
