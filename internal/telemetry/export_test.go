package telemetry

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// testSpans returns three ended spans of one resource in two scopes.
func testSpans(t testing.TB) []*spanData {
	t.Helper()
	id := func(s string) [16]byte {
		tid, err := trace.TraceIDFromHex(s)
		if err != nil {
			t.Fatal(err)
		}
		return tid
	}
	sid := func(s string) [8]byte {
		id, err := trace.SpanIDFromHex(s)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	state, err := trace.ParseTraceState("vendor=abc")
	if err != nil {
		t.Fatal(err)
	}
	tid := id("0af7651916cd43dd8448eb211c80319c")
	res := &resourceInfo{attrs: []attribute.KeyValue{attribute.String("service.name", "gw")}}
	scope := scopeInfo{name: "github.com/edge-mcp/edge-mcp", version: "1.2.3"}
	start := time.Unix(1718000000, 5)
	return []*spanData{
		{
			name:   "tools/call read_file",
			sc:     trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid("b7ad6b7169203331"), TraceFlags: trace.FlagsSampled, TraceState: state}),
			parent: trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid("00f067aa0ba902b7"), TraceFlags: trace.FlagsSampled, Remote: true}),
			kind:   trace.SpanKindServer,
			start:  start,
			end:    start.Add(1500 * time.Millisecond),
			attrs:  []attribute.KeyValue{attribute.String("mcp.tool", "read_file"), attribute.Int64("mcp.bytes", 1<<40)},
			events: []event{{name: "exception", time: start.Add(time.Second),
				attrs: []attribute.KeyValue{attribute.String("exception.message", "boom")}, droppedAttrs: 1}},
			links: []link{{sc: trace.NewSpanContext(trace.SpanContextConfig{
				TraceID: id("4bf92f3577b34da6a3ce929d0e0e4736"), SpanID: sid("0102030405060708")}),
				attrs: []attribute.KeyValue{attribute.Bool("follows", true)}}},
			status:       status{code: codes.Error, description: "upstream failed"},
			droppedAttrs: 2,
			droppedLinks: 3,
			resource:     res,
			scope:        scope,
		},
		{
			name:     "dial",
			sc:       trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid("1111111111111111")}),
			kind:     trace.SpanKindClient,
			start:    start,
			end:      start,
			status:   status{code: codes.Ok},
			resource: res,
			scope:    scopeInfo{name: "other"},
		},
		{
			name:     "policy",
			sc:       trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid("2222222222222222"), TraceFlags: trace.FlagsSampled}),
			parent:   trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid("b7ad6b7169203331"), TraceFlags: trace.FlagsSampled}),
			kind:     trace.SpanKindInternal,
			start:    start,
			end:      start.Add(time.Millisecond),
			resource: res,
			scope:    scope,
		},
	}
}

func TestEncodeSpans(t *testing.T) {
	const want = `{"resourceSpans":[{
	  "resource":{"attributes":[{"key":"service.name","value":{"stringValue":"gw"}}]},
	  "scopeSpans":[
	    {"scope":{"name":"github.com/edge-mcp/edge-mcp","version":"1.2.3"},"spans":[
	      {"traceId":"0af7651916cd43dd8448eb211c80319c","spanId":"b7ad6b7169203331","traceState":"vendor=abc",
	       "parentSpanId":"00f067aa0ba902b7","flags":769,"name":"tools/call read_file","kind":2,
	       "startTimeUnixNano":"1718000000000000005","endTimeUnixNano":"1718000001500000005",
	       "attributes":[{"key":"mcp.tool","value":{"stringValue":"read_file"}},{"key":"mcp.bytes","value":{"intValue":"1099511627776"}}],
	       "droppedAttributesCount":2,
	       "events":[{"timeUnixNano":"1718000001000000005","name":"exception",
	         "attributes":[{"key":"exception.message","value":{"stringValue":"boom"}}],"droppedAttributesCount":1}],
	       "links":[{"traceId":"4bf92f3577b34da6a3ce929d0e0e4736","spanId":"0102030405060708",
	         "attributes":[{"key":"follows","value":{"boolValue":true}}],"flags":256}],
	       "droppedLinksCount":3,
	       "status":{"code":2,"message":"upstream failed"}},
	      {"traceId":"0af7651916cd43dd8448eb211c80319c","spanId":"2222222222222222","parentSpanId":"b7ad6b7169203331",
	       "flags":257,"name":"policy","kind":1,
	       "startTimeUnixNano":"1718000000000000005","endTimeUnixNano":"1718000000001000005","status":{"code":0}}]},
	    {"scope":{"name":"other"},"spans":[
	      {"traceId":"0af7651916cd43dd8448eb211c80319c","spanId":"1111111111111111","flags":256,"name":"dial","kind":3,
	       "startTimeUnixNano":"1718000000000000005","endTimeUnixNano":"1718000000000000005","status":{"code":1}}]}]}]}`
	got, err := encodeSpans(testSpans(t))
	if err != nil {
		t.Fatal(err)
	}
	var gotV, wantV any
	if err := json.Unmarshal(got, &gotV); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(want), &wantV); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(gotV, wantV) {
		t.Errorf("encodeSpans\n got %s\nwant %s", got, want)
	}
}

func TestValueOf(t *testing.T) {
	tests := []struct {
		name string
		v    attribute.Value
		want string
	}{
		{"string", attribute.StringValue("v"), `{"stringValue":"v"}`},
		{"empty string", attribute.StringValue(""), `{"stringValue":""}`},
		{"true", attribute.BoolValue(true), `{"boolValue":true}`},
		{"false", attribute.BoolValue(false), `{"boolValue":false}`},
		{"int64 zero", attribute.Int64Value(0), `{"intValue":"0"}`},
		{"int64 min", attribute.Int64Value(math.MinInt64), `{"intValue":"-9223372036854775808"}`},
		{"int64 max", attribute.Int64Value(math.MaxInt64), `{"intValue":"9223372036854775807"}`},
		{"float64", attribute.Float64Value(1.5), `{"doubleValue":1.5}`},
		{"float64 zero", attribute.Float64Value(0), `{"doubleValue":0}`},
		{"float64 large", attribute.Float64Value(1e300), `{"doubleValue":1e+300}`},
		{"float64 NaN", attribute.Float64Value(math.NaN()), `{"doubleValue":"NaN"}`},
		{"float64 +Inf", attribute.Float64Value(math.Inf(1)), `{"doubleValue":"Infinity"}`},
		{"float64 -Inf", attribute.Float64Value(math.Inf(-1)), `{"doubleValue":"-Infinity"}`},
		{"string slice", attribute.StringSliceValue([]string{"a", ""}),
			`{"arrayValue":{"values":[{"stringValue":"a"},{"stringValue":""}]}}`},
		{"empty string slice", attribute.StringSliceValue(nil), `{"arrayValue":{}}`},
		{"bool slice", attribute.BoolSliceValue([]bool{false, true}),
			`{"arrayValue":{"values":[{"boolValue":false},{"boolValue":true}]}}`},
		{"int64 slice", attribute.Int64SliceValue([]int64{-1, 2}),
			`{"arrayValue":{"values":[{"intValue":"-1"},{"intValue":"2"}]}}`},
		{"float64 slice", attribute.Float64SliceValue([]float64{0.25, math.NaN()}),
			`{"arrayValue":{"values":[{"doubleValue":0.25},{"doubleValue":"NaN"}]}}`},
		{"bytes", attribute.ByteSliceValue([]byte{0xfb, 0xff}), `{"bytesValue":"+/8="}`},
		{"empty bytes", attribute.ByteSliceValue(nil), `{"bytesValue":""}`},
		{"mixed slice", attribute.SliceValue(attribute.StringValue("s"), attribute.Int64Value(3)),
			`{"arrayValue":{"values":[{"stringValue":"s"},{"intValue":"3"}]}}`},
		{"map", attribute.MapValue(attribute.String("k", "v"), attribute.Bool("b", true)),
			`{"kvlistValue":{"values":[{"key":"b","value":{"boolValue":true}},{"key":"k","value":{"stringValue":"v"}}]}}`},
		{"empty", attribute.Value{}, `{}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := json.Marshal(valueOf(tt.v))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("valueOf(%v) = %s, want %s", tt.v.Emit(), got, tt.want)
			}
		})
	}
}

func TestRetryDeliversOnce(t *testing.T) {
	for _, status := range []int{http.StatusServiceUnavailable, http.StatusTooManyRequests} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			rc := &receiver{script: []answer{{status: status, header: map[string]string{"Retry-After": "0"}}}}
			srv := httptest.NewServer(rc)
			defer srv.Close()
			tr, err := Setup(t.Context(), Config{Endpoint: srv.URL})
			if err != nil {
				t.Fatal(err)
			}
			_, span := tr.Start(t.Context(), "tools/call")
			span.End()
			if err := tr.Shutdown(t.Context()); err != nil {
				t.Fatal(err)
			}
			if n := rc.attemptCount(); n != 2 {
				t.Errorf("collector saw %d requests, want 2 (one refused, one retry)", n)
			}
			spans := decodeSpans(t, rc.received())
			if len(spans) != 1 || spans[0].name != "tools/call" {
				t.Errorf("delivered spans = %+v, want the span once", spans)
			}
		})
	}
}

func TestExportResponses(t *testing.T) {
	jsonType := map[string]string{"Content-Type": "application/json"}
	retryNow := map[string]string{"Retry-After": "0"}
	tests := []struct {
		name          string
		script        []answer
		setup         func(*exporter)
		timeout       time.Duration // of the export context; 0 for none
		wantErr       error
		wantText      string
		wantAttempts  int
		wantDelivered int
	}{
		{name: "200", wantAttempts: 1, wantDelivered: 1},
		{name: "200 with a non-JSON body", script: []answer{{status: 200, body: "ok"}}, wantAttempts: 1, wantDelivered: 1},
		{name: "200 with a large body", script: []answer{{status: 200, header: jsonType, body: strings.Repeat(" ", 1<<20)}},
			wantAttempts: 1, wantDelivered: 1},
		{name: "empty partial success", script: []answer{{status: 200, header: jsonType, body: `{"partialSuccess":{}}`}},
			wantAttempts: 1, wantDelivered: 1},
		{name: "partial success", script: []answer{{status: 200, header: jsonType,
			body: `{"partialSuccess":{"rejectedSpans":"2","errorMessage":"too old"}}`}},
			wantErr: errPartialSuccess, wantText: `2 spans rejected: "too old"`, wantAttempts: 1, wantDelivered: 1},
		{name: "partial success count as a number", script: []answer{{status: 200, header: jsonType,
			body: `{"partialSuccess":{"rejectedSpans":1}}`}},
			wantErr: errPartialSuccess, wantText: "1 spans rejected", wantAttempts: 1, wantDelivered: 1},
		{name: "400 not retried, status message quoted", script: []answer{{status: 400, header: jsonType,
			body: `{"code":3,"message":"bad span\nid"}`}},
			wantErr: errExportRejected, wantText: `400 Bad Request: "bad span\nid"`, wantAttempts: 1},
		{name: "500 not retried", script: []answer{{status: 500}}, wantErr: errExportRejected, wantText: "500", wantAttempts: 1},
		{name: "long text body cut", script: []answer{{status: 400, header: map[string]string{"Content-Type": "text/plain"},
			body: strings.Repeat("x", 1<<20)}},
			wantErr: errExportRejected, wantText: strings.Repeat("x", maxErrorText) + `..."`, wantAttempts: 1},
		{name: "503 twice", script: []answer{{status: 503, header: retryNow}, {status: 503, header: retryNow}},
			wantErr: errExportRejected, wantText: "503", wantAttempts: 2},
		{name: "503 then 200", script: []answer{{status: 503, header: retryNow}}, wantAttempts: 2, wantDelivered: 1},
		{name: "429 with a past HTTP date", script: []answer{{status: 429, header: map[string]string{
			"Retry-After": time.Now().Add(-time.Hour).UTC().Format(http.TimeFormat)}}},
			wantAttempts: 2, wantDelivered: 1},
		{name: "no Retry-After waits the default delay", script: []answer{{status: 503}},
			setup: func(e *exporter) { e.retryDelay = 0 }, wantAttempts: 2, wantDelivered: 1},
		{name: "Retry-After beyond the bound", script: []answer{{status: 503, header: map[string]string{"Retry-After": "3600"}}},
			wantErr: errExportRejected, wantText: "not retried", wantAttempts: 1},
		{name: "Retry-After beyond the deadline", script: []answer{{status: 503, header: map[string]string{"Retry-After": "600"}}},
			setup: func(e *exporter) { e.maxRetryDelay = time.Hour }, timeout: time.Minute,
			wantErr: errExportRejected, wantText: "deadline", wantAttempts: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rc := &receiver{script: tt.script}
			srv := httptest.NewServer(rc)
			defer srv.Close()
			e := newExporter(srv.URL+defaultTracesPath, nil, false)
			if tt.setup != nil {
				tt.setup(e)
			}
			ctx := t.Context()
			if tt.timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tt.timeout)
				defer cancel()
			}
			err := e.ExportSpans(ctx, testSpans(t))
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Fatalf("ExportSpans error = %v, want %v", err, tt.wantErr)
			}
			if err != nil && (!strings.Contains(err.Error(), tt.wantText) || len(err.Error()) > 1000) {
				t.Errorf("error %q (%d bytes) does not contain %q or is too long", err, len(err.Error()), tt.wantText)
			}
			if n := rc.attemptCount(); n != tt.wantAttempts {
				t.Errorf("collector saw %d requests, want %d", n, tt.wantAttempts)
			}
			if n := len(rc.received()); n != tt.wantDelivered {
				t.Errorf("collector accepted %d requests, want %d", n, tt.wantDelivered)
			}
		})
	}
}

func TestExportRequestHeaders(t *testing.T) {
	var got http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Clone()
	}))
	defer srv.Close()
	e := newExporter(srv.URL, map[string]string{"X-Tenant": "t1", "Content-Type": "text/plain"}, true)
	if err := e.ExportSpans(t.Context(), testSpans(t)); err != nil {
		t.Fatal(err)
	}
	if got.Get("X-Tenant") != "t1" || got.Get("Content-Type") != "application/json" ||
		got.Get("Content-Encoding") != "gzip" || got.Get("User-Agent") != userAgent {
		t.Errorf("request headers = %v", got)
	}
	if e.client.Timeout != 10*time.Second {
		t.Errorf("HTTP timeout = %v, want 10s", e.client.Timeout)
	}
}

func TestExportUnreachable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	err := newExporter(url, nil, false).ExportSpans(t.Context(), testSpans(t))
	if err == nil || errors.Is(err, errExportRejected) {
		t.Fatalf("ExportSpans to a closed port = %v, want a transport error", err)
	}
}

func TestExportAfterShutdown(t *testing.T) {
	rc := &receiver{}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	e := newExporter(srv.URL, nil, false)
	if err := e.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := e.ExportSpans(t.Context(), testSpans(t)); !errors.Is(err, errExporterShutdown) {
		t.Errorf("ExportSpans after Shutdown = %v, want errExporterShutdown", err)
	}
	if n := rc.attemptCount(); n != 0 {
		t.Errorf("collector saw %d requests after Shutdown", n)
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		in     string
		want   time.Duration
		wantOK bool
	}{
		{"", 0, false},
		{"0", 0, true},
		{" 7 ", 7 * time.Second, true},
		{"99999999999999999999", math.MaxInt64, true},
		{"-1", 0, false},
		{"1.5", 0, false},
		{"Sun, 01 Mar 2026 12:00:30 GMT", 30 * time.Second, true},
		{"Sun, 01 Mar 2026 11:00:00 GMT", 0, true},
		{"soon", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, ok := parseRetryAfter(tt.in, now)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("parseRetryAfter(%q) = %v, %v; want %v, %v", tt.in, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func FuzzParseRetryAfter(f *testing.F) {
	for _, s := range []string{"", "0", "120", "18446744073709551616", "Wed, 21 Oct 2015 07:28:00 GMT", "Monday, 02-Jan-06 15:04:05 MST", "x"} {
		f.Add(s)
	}
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, in string) {
		d, ok := parseRetryAfter(in, now)
		if d < 0 {
			t.Fatalf("parseRetryAfter(%q) = %v, negative", in, d)
		}
		if !ok && d != 0 {
			t.Fatalf("parseRetryAfter(%q) = %v, false", in, d)
		}
	})
}

func BenchmarkEncodeSpans(b *testing.B) {
	spans := testSpans(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := encodeSpans(spans); err != nil {
			b.Fatal(err)
		}
	}
}
