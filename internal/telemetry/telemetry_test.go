package telemetry

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// receiver is a minimal OTLP/HTTP trace receiver.
type receiver struct {
	mu       sync.Mutex
	requests []receivedRequest
}

type receivedRequest struct {
	path, contentType, auth string
	body                    []byte
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "method", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	rc.mu.Lock()
	rc.requests = append(rc.requests, receivedRequest{r.URL.Path, r.Header.Get("Content-Type"), r.Header.Get("Authorization"), body})
	rc.mu.Unlock()
	resp, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(resp)
}

func (rc *receiver) received() []receivedRequest {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]receivedRequest(nil), rc.requests...)
}

// exportedSpan is a span as decoded from an export request.
type exportedSpan struct {
	service, name, traceID, parentSpanID string
	attrs                                map[string]string
}

func decodeSpans(t *testing.T, reqs []receivedRequest) []exportedSpan {
	t.Helper()
	var spans []exportedSpan
	for _, r := range reqs {
		var msg coltrace.ExportTraceServiceRequest
		if err := proto.Unmarshal(r.body, &msg); err != nil {
			t.Fatalf("decoding export request: %v", err)
		}
		for _, rs := range msg.GetResourceSpans() {
			service := ""
			for _, kv := range rs.GetResource().GetAttributes() {
				if kv.GetKey() == "service.name" {
					service = kv.GetValue().GetStringValue()
				}
			}
			for _, ss := range rs.GetScopeSpans() {
				for _, s := range ss.GetSpans() {
					attrs := map[string]string{}
					for _, kv := range s.GetAttributes() {
						attrs[kv.GetKey()] = kv.GetValue().GetStringValue()
					}
					spans = append(spans, exportedSpan{service, s.GetName(),
						hex.EncodeToString(s.GetTraceId()), hex.EncodeToString(s.GetParentSpanId()), attrs})
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
	}{
		{name: "default path", path: "", wantPath: "/v1/traces"},
		{name: "custom path", path: "/otlp/v1/traces", wantPath: "/otlp/v1/traces"},
		{name: "host:port with Insecure", insecureNoScheme: true, wantPath: "/v1/traces"},
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
			}
			if tt.insecureNoScheme {
				cfg.Endpoint = strings.TrimPrefix(srv.URL, "http://")
				cfg.Insecure = true
			}
			tr, err := Setup(t.Context(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			_, span := tr.Start(t.Context(), "tools/call", attribute.String("mcp.tool", "read_file"))
			span.End()
			if err := tr.Shutdown(t.Context()); err != nil {
				t.Fatal(err)
			}
			reqs := rc.received()
			if len(reqs) == 0 {
				t.Fatal("no export request arrived after Shutdown")
			}
			for _, r := range reqs {
				if r.path != tt.wantPath || r.contentType != "application/x-protobuf" || len(r.body) == 0 || r.auth != "Bearer t0k" {
					t.Errorf("export request path=%q content-type=%q auth=%q body=%d bytes", r.path, r.contentType, r.auth, len(r.body))
				}
			}
			spans := decodeSpans(t, reqs)
			if len(spans) != 1 || spans[0].name != "tools/call" || spans[0].service != "gw-test" || spans[0].attrs["mcp.tool"] != "read_file" {
				t.Fatalf("exported spans = %+v", spans)
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
