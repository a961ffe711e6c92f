package telemetry

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// receiver is a minimal OTLP/HTTP JSON trace receiver. It answers its
// first requests from script, then 200 with an empty JSON response.
type receiver struct {
	mu       sync.Mutex
	script   []answer
	attempts int               // requests received
	requests []receivedRequest // requests answered with 2xx
}

// answer is a scripted response.
type answer struct {
	status int
	header map[string]string
	body   string
}

type receivedRequest struct {
	path, contentType, contentEncoding, auth string
	body                                     []byte // decompressed
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "method", http.StatusMethodNotAllowed)
		return
	}
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	data, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	rc.mu.Lock()
	a := answer{status: http.StatusOK, header: map[string]string{"Content-Type": "application/json"}, body: "{}"}
	if rc.attempts < len(rc.script) {
		a = rc.script[rc.attempts]
	}
	rc.attempts++
	if a.status >= 200 && a.status < 300 {
		rc.requests = append(rc.requests, receivedRequest{r.URL.Path, r.Header.Get("Content-Type"),
			r.Header.Get("Content-Encoding"), r.Header.Get("Authorization"), data})
	}
	rc.mu.Unlock()
	for k, v := range a.header {
		w.Header().Set(k, v)
	}
	w.WriteHeader(a.status)
	io.WriteString(w, a.body)
}

func (rc *receiver) received() []receivedRequest {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]receivedRequest(nil), rc.requests...)
}

func (rc *receiver) attemptCount() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.attempts
}

// The OTLP/JSON request as the tests read it, independently of the
// exporter's own types.
type (
	otlpRequest struct {
		ResourceSpans []struct {
			Resource struct {
				Attributes []otlpKeyValue `json:"attributes"`
			} `json:"resource"`
			ScopeSpans []struct {
				Scope struct {
					Name string `json:"name"`
				} `json:"scope"`
				Spans []otlpSpan `json:"spans"`
			} `json:"scopeSpans"`
		} `json:"resourceSpans"`
	}
	otlpKeyValue struct {
		Key   string                     `json:"key"`
		Value map[string]json.RawMessage `json:"value"`
	}
	otlpSpan struct {
		TraceID           string          `json:"traceId"`
		SpanID            string          `json:"spanId"`
		ParentSpanID      string          `json:"parentSpanId"`
		Flags             uint32          `json:"flags"`
		Name              string          `json:"name"`
		Kind              int             `json:"kind"`
		StartTimeUnixNano json.RawMessage `json:"startTimeUnixNano"`
		EndTimeUnixNano   json.RawMessage `json:"endTimeUnixNano"`
		Attributes        []otlpKeyValue  `json:"attributes"`
	}
)

// exportedSpan is a span as decoded from an export request.
type exportedSpan struct {
	service, scope, name, traceID, spanID, parentSpanID string
	flags                                               uint32
	kind                                                int
	attrs                                               map[string]string // stringValue attributes
}

var (
	hexTraceID = regexp.MustCompile(`^[0-9a-f]{32}$`)
	hexSpanID  = regexp.MustCompile(`^[0-9a-f]{16}$`)
)

// stringValue returns the stringValue of an OTLP/JSON AnyValue.
func stringValue(v map[string]json.RawMessage) string {
	var s string
	json.Unmarshal(v["stringValue"], &s)
	return s
}

// unixNanoString decodes an OTLP/JSON fixed64 time, which must be a JSON
// string holding a decimal number.
func unixNanoString(t *testing.T, raw json.RawMessage) uint64 {
	t.Helper()
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatalf("time %s is not a JSON string: %v", raw, err)
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || n == 0 {
		t.Fatalf("time %q is not a positive decimal number", s)
	}
	return n
}

// decodeSpans decodes export requests, checking they are OTLP/JSON with hex
// ids and string times.
func decodeSpans(t *testing.T, reqs []receivedRequest) []exportedSpan {
	t.Helper()
	var spans []exportedSpan
	for _, r := range reqs {
		if r.contentType != "application/json" {
			t.Errorf("Content-Type = %q, want application/json", r.contentType)
		}
		var msg otlpRequest
		if err := json.Unmarshal(r.body, &msg); err != nil {
			t.Fatalf("decoding export request %s: %v", r.body, err)
		}
		for _, rs := range msg.ResourceSpans {
			service := ""
			for _, kv := range rs.Resource.Attributes {
				if kv.Key == "service.name" {
					service = stringValue(kv.Value)
				}
			}
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					if !hexTraceID.MatchString(s.TraceID) || !hexSpanID.MatchString(s.SpanID) ||
						(s.ParentSpanID != "" && !hexSpanID.MatchString(s.ParentSpanID)) {
						t.Errorf("span ids trace=%q span=%q parent=%q are not lowercase hex of 16 and 8 bytes", s.TraceID, s.SpanID, s.ParentSpanID)
					}
					if start, end := unixNanoString(t, s.StartTimeUnixNano), unixNanoString(t, s.EndTimeUnixNano); end < start {
						t.Errorf("span ends at %d, before its start %d", end, start)
					}
					attrs := map[string]string{}
					for _, kv := range s.Attributes {
						attrs[kv.Key] = stringValue(kv.Value)
					}
					spans = append(spans, exportedSpan{service, ss.Scope.Name, s.Name, s.TraceID, s.SpanID,
						s.ParentSpanID, s.Flags, s.Kind, attrs})
				}
			}
		}
	}
	return spans
}

func TestExport(t *testing.T) {
	tests := []struct {
		name, path, wantPath string
		insecureNoScheme     bool
		compression          string
	}{
		{name: "default path", path: "", wantPath: "/v1/traces"},
		{name: "custom path", path: "/otlp/v1/traces", wantPath: "/otlp/v1/traces"},
		{name: "host:port with Insecure", insecureNoScheme: true, wantPath: "/v1/traces"},
		{name: "gzip", wantPath: "/v1/traces", compression: "gzip"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rc := &receiver{}
			srv := httptest.NewServer(rc)
			defer srv.Close()
			cfg := Config{
				Endpoint:    srv.URL + tt.path,
				ServiceName: "gw-test",
				Headers:     map[string]string{"Authorization": "Bearer t0k"},
				Compression: tt.compression,
			}
			if tt.insecureNoScheme {
				cfg.Endpoint = strings.TrimPrefix(srv.URL, "http://")
				cfg.Insecure = true
			}
			tr, err := Setup(t.Context(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			ctx, parent := tr.Start(t.Context(), "session")
			_, span := tr.Start(ctx, "tools/call", attribute.String("mcp.tool", "read_file"))
			span.End()
			parent.End()
			if err := tr.Shutdown(t.Context()); err != nil {
				t.Fatal(err)
			}
			reqs := rc.received()
			if len(reqs) == 0 {
				t.Fatal("no export request arrived after Shutdown")
			}
			for _, r := range reqs {
				if r.path != tt.wantPath || len(r.body) == 0 || r.auth != "Bearer t0k" || r.contentEncoding != tt.compression {
					t.Errorf("export request path=%q content-encoding=%q auth=%q body=%d bytes", r.path, r.contentEncoding, r.auth, len(r.body))
				}
			}
			spans := decodeSpans(t, reqs)
			if len(spans) != 2 {
				t.Fatalf("exported spans = %+v, want 2", spans)
			}
			child, root := spans[0], spans[1]
			if child.name != "tools/call" || child.service != "gw-test" || child.attrs["mcp.tool"] != "read_file" ||
				child.scope != instrumentationName || child.kind != 1 {
				t.Errorf("child span = %+v", child)
			}
			if root.name != "session" || root.parentSpanID != "" || child.parentSpanID != root.spanID || child.traceID != root.traceID {
				t.Errorf("child %+v is not a child of root %+v", child, root)
			}
			// Sampled, local parent: W3C flags 01 and "has is_remote" set.
			if child.flags != 0x101 {
				t.Errorf("child flags = %#x, want 0x101", child.flags)
			}
		})
	}
}

func TestClientTraceContinues(t *testing.T) {
	rc := &receiver{}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	tr, err := Setup(t.Context(), Config{Endpoint: srv.URL, SampleRatio: 1e-12})
	if err != nil {
		t.Fatal(err)
	}
	const (
		traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
		spanID  = "00f067aa0ba902b7"
	)
	params := json.RawMessage(`{"name":"x","_meta":{"traceparent":"00-` + traceID + `-` + spanID + `-01"}}`)
	ctx := ExtractMeta(t.Context(), params)
	ctx, span := tr.Start(ctx, "tools/call")
	if got := span.SpanContext().TraceID().String(); got != traceID {
		t.Errorf("gateway span trace id = %s, want the client's %s", got, traceID)
	}
	// The upstream request carries the gateway span as parent.
	out := InjectMeta(ctx, json.RawMessage(`{"name":"x"}`))
	span.End()
	up := trace.SpanContextFromContext(ExtractMeta(context.Background(), out))
	if up.TraceID().String() != traceID || up.SpanID() != span.SpanContext().SpanID() {
		t.Errorf("upstream trace context = %s/%s, want %s/%s", up.TraceID(), up.SpanID(), traceID, span.SpanContext().SpanID())
	}
	if err := tr.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	// The client sampled the trace, so it is exported despite the tiny
	// ratio for new traces.
	spans := decodeSpans(t, rc.received())
	if len(spans) != 1 || spans[0].traceID != traceID || spans[0].parentSpanID != spanID {
		t.Fatalf("exported spans = %+v, want one child of %s/%s", spans, traceID, spanID)
	}
	// Sampled, and the parent is remote.
	if spans[0].flags != 0x301 {
		t.Errorf("flags = %#x, want 0x301", spans[0].flags)
	}
}

func TestDisabled(t *testing.T) {
	tr, err := Setup(t.Context(), Config{})
	if err != nil || tr != nil {
		t.Fatalf("Setup(no endpoint) = %v, %v; want nil, nil", tr, err)
	}
	parent := trace.ContextWithRemoteSpanContext(t.Context(), testSpanContext(t, ""))
	ctx, span := tr.Start(parent, "x", attribute.Int("n", 1))
	if ctx != parent {
		t.Error("disabled Start changed the context")
	}
	if span.IsRecording() || span.SpanContext().IsValid() {
		t.Error("disabled Start returned a real span")
	}
	span.End()
	if err := tr.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	// Trace context from a client still passes through.
	out := InjectMeta(ctx, nil)
	if got := trace.SpanContextFromContext(ExtractMeta(t.Context(), out)).TraceID(); got != testSpanContext(t, "").TraceID() {
		t.Errorf("trace id through disabled tracer = %s", got)
	}
}

func TestSetupErrors(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
	}{
		{"ratio above 1", Config{Endpoint: "http://127.0.0.1:4318", SampleRatio: 2}},
		{"negative ratio", Config{Endpoint: "http://127.0.0.1:4318", SampleRatio: -0.1}},
		{"bad scheme", Config{Endpoint: "ftp://127.0.0.1:4318"}},
		{"no host", Config{Endpoint: "http:///v1/traces"}},
		{"unparsable", Config{Endpoint: "http://[::1"}},
		{"unknown compression", Config{Endpoint: "http://127.0.0.1:4318", Compression: "zstd"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr, err := Setup(t.Context(), tt.cfg)
			if !errors.Is(err, ErrInvalidConfig) {
				tr.Shutdown(t.Context())
				t.Fatalf("Setup error = %v, want ErrInvalidConfig", err)
			}
		})
	}
}

func BenchmarkStartDisabled(b *testing.B) {
	var tr *Tracer
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		_, span := tr.Start(ctx, "tools/call")
		span.End()
	}
}
