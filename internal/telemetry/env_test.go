package telemetry

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http/httptest"
	"reflect"
	"testing"

	"go.opentelemetry.io/otel/trace"
)

// clearEnv empties every variable FromEnv reads for the test.
func clearEnv(t *testing.T) {
	for _, name := range []string{EnvEndpoint, EnvTracesEndpoint, EnvHeaders, EnvTracesHeaders,
		EnvCompression, EnvServiceName, EnvSampler, EnvSamplerArg} {
		t.Setenv(name, "")
	}
}

func TestFromEnv(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		cfg  Config
		want Config
	}{
		{"nothing set", nil, Config{}, Config{}},
		{"base endpoint gets /v1/traces", map[string]string{EnvEndpoint: "http://collector:4318"}, Config{},
			Config{Endpoint: "http://collector:4318/v1/traces"}},
		{"base endpoint with a path", map[string]string{EnvEndpoint: "https://otel.example/otlp/"}, Config{},
			Config{Endpoint: "https://otel.example/otlp/v1/traces"}},
		{"traces endpoint as is, before the base", map[string]string{EnvEndpoint: "http://a:4318", EnvTracesEndpoint: "http://b:4318/t"}, Config{},
			Config{Endpoint: "http://b:4318/t"}},
		{"config endpoint wins", map[string]string{EnvEndpoint: "http://a:4318"}, Config{Endpoint: "http://cfg:4318"},
			Config{Endpoint: "http://cfg:4318"}},
		{"service name, compression", map[string]string{EnvServiceName: "edge-a", EnvCompression: "gzip"}, Config{},
			Config{ServiceName: "edge-a", Compression: "gzip"}},
		{"compression none", map[string]string{EnvCompression: "none"}, Config{}, Config{}},
		{"config service name wins", map[string]string{EnvServiceName: "edge-a"}, Config{ServiceName: "cfg"},
			Config{ServiceName: "cfg"}},
		{"headers merge, config and traces headers win",
			map[string]string{EnvHeaders: "Authorization=Bearer%20env, x-tenant = t1 ,x-a=1", EnvTracesHeaders: "x-a=2"},
			Config{Headers: map[string]string{"Authorization": "Bearer cfg"}},
			Config{Headers: map[string]string{"Authorization": "Bearer cfg", "x-tenant": "t1", "x-a": "2"}}},
		{"parentbased ratio", map[string]string{EnvSampler: "parentbased_traceidratio", EnvSamplerArg: "0.25"}, Config{},
			Config{Sampler: SamplerParentBasedRatio, SampleRatio: 0.25}},
		{"ratio without arg is 1", map[string]string{EnvSampler: "traceidratio"}, Config{},
			Config{Sampler: SamplerRatio, SampleRatio: 1}},
		{"ratio 0 is always_off", map[string]string{EnvSampler: "traceidratio", EnvSamplerArg: "0"}, Config{},
			Config{Sampler: SamplerAlwaysOff}},
		{"parentbased ratio 0", map[string]string{EnvSampler: "parentbased_traceidratio", EnvSamplerArg: "0"}, Config{},
			Config{Sampler: SamplerParentBasedAlwaysOff}},
		{"always_on, case and spaces", map[string]string{EnvSampler: " Always_On "}, Config{}, Config{Sampler: SamplerAlwaysOn}},
		{"parentbased_always_on", map[string]string{EnvSampler: "parentbased_always_on"}, Config{}, Config{Sampler: SamplerParentBasedAlwaysOn}},
		{"config ratio wins over the env sampler", map[string]string{EnvSampler: "always_off"}, Config{SampleRatio: 0.5},
			Config{SampleRatio: 0.5}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clearEnv(t)
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			var before map[string]string
			if tt.cfg.Headers != nil {
				before = maps.Clone(tt.cfg.Headers)
			}
			got := FromEnv(tt.cfg)
			if got.envErr != nil {
				t.Fatalf("FromEnv error: %v", got.envErr)
			}
			if !maps.Equal(got.Headers, tt.want.Headers) {
				t.Errorf("headers = %v, want %v", got.Headers, tt.want.Headers)
			}
			if !maps.Equal(tt.cfg.Headers, before) {
				t.Errorf("FromEnv changed the config's headers to %v", tt.cfg.Headers)
			}
			got.Headers, tt.want.Headers = nil, nil
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("FromEnv = %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestFromEnvInvalid(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
	}{
		{"unknown sampler", map[string]string{EnvSampler: "jaeger_remote"}},
		{"ratio above 1", map[string]string{EnvSampler: "traceidratio", EnvSamplerArg: "1.5"}},
		{"ratio not a number", map[string]string{EnvSampler: "parentbased_traceidratio", EnvSamplerArg: "half"}},
		{"header without =", map[string]string{EnvHeaders: "Authorization"}},
		{"bad escape", map[string]string{EnvHeaders: "a=%zz"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clearEnv(t)
			t.Setenv(EnvEndpoint, "http://127.0.0.1:4318")
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			tr, err := Setup(t.Context(), FromEnv(Config{}))
			if !errors.Is(err, ErrInvalidConfig) {
				tr.Shutdown(t.Context())
				t.Fatalf("Setup error = %v, want ErrInvalidConfig", err)
			}
		})
	}
}

// TestEnvExport: a tracer configured only by the environment exports to
// the collector it names, with its headers and service name.
func TestEnvExport(t *testing.T) {
	rc := &receiver{}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	clearEnv(t)
	t.Setenv(EnvEndpoint, srv.URL+"/base")
	t.Setenv(EnvHeaders, "Authorization=Bearer%20env-token")
	t.Setenv(EnvServiceName, "edge-from-env")
	t.Setenv(EnvSampler, "always_on")
	tr, err := Setup(t.Context(), FromEnv(Config{}))
	if err != nil || tr == nil {
		t.Fatalf("Setup = %v, %v", tr, err)
	}
	_, span := tr.Start(t.Context(), "tools/call")
	span.End()
	if err := tr.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	reqs := rc.received()
	if len(reqs) == 0 {
		t.Fatal("no export request arrived")
	}
	if r := reqs[0]; r.path != "/base/v1/traces" || r.auth != "Bearer env-token" {
		t.Errorf("export request path=%q auth=%q", r.path, r.auth)
	}
	if spans := decodeSpans(t, reqs); len(spans) != 1 || spans[0].service != "edge-from-env" {
		t.Errorf("spans = %+v", spans)
	}
}

func TestSamplers(t *testing.T) {
	sampled := trace.ContextWithRemoteSpanContext(t.Context(), testSpanContext(t, ""))
	unsampled := trace.ContextWithRemoteSpanContext(t.Context(), testSpanContext(t, "").WithTraceFlags(0))
	tests := []struct {
		sampler string
		ratio   float64
		// whether a root span, a child of a sampled and a child of an
		// unsampled remote parent are sampled
		root, childOfSampled, childOfUnsampled bool
	}{
		{SamplerParentBasedRatio, 1, true, true, false},
		{"", 0, true, true, false},
		{SamplerRatio, 1, true, true, true},
		{SamplerAlwaysOn, 0, true, true, true},
		{SamplerParentBasedAlwaysOn, 0, true, true, false},
		{SamplerParentBasedAlwaysOff, 0, false, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.sampler, func(t *testing.T) {
			tr, err := Setup(t.Context(), Config{Endpoint: "http://127.0.0.1:1", Sampler: tt.sampler, SampleRatio: tt.ratio})
			if err != nil || tr == nil {
				t.Fatalf("Setup = %v, %v", tr, err)
			}
			defer tr.Shutdown(t.Context())
			for _, c := range []struct {
				name string
				ctx  context.Context
				want bool
			}{{"root", t.Context(), tt.root}, {"child of sampled", sampled, tt.childOfSampled}, {"child of unsampled", unsampled, tt.childOfUnsampled}} {
				_, span := tr.Start(c.ctx, "x")
				if got := span.SpanContext().IsSampled(); got != c.want {
					t.Errorf("%s: sampled = %v, want %v", c.name, got, c.want)
				}
				span.End()
			}
		})
	}
	t.Run(SamplerAlwaysOff, func(t *testing.T) {
		tr, err := Setup(t.Context(), Config{Endpoint: "http://127.0.0.1:1", Sampler: SamplerAlwaysOff})
		if err != nil || tr != nil {
			t.Errorf("Setup(always_off) = %v, %v; want nil, nil: no tracing code runs", tr, err)
		}
	})
	t.Run("unknown", func(t *testing.T) {
		if _, err := Setup(t.Context(), Config{Endpoint: "http://127.0.0.1:1", Sampler: "sometimes"}); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("Setup error = %v, want ErrInvalidConfig", err)
		}
	})
}

func ExampleFromEnv() {
	// Set by the deployment, e.g. in a systemd unit or a container:
	//   OTEL_EXPORTER_OTLP_ENDPOINT=http://collector:4318
	//   OTEL_TRACES_SAMPLER=parentbased_traceidratio OTEL_TRACES_SAMPLER_ARG=0.1
	// The configuration file's values win; the environment fills the rest.
	cfg := FromEnv(Config{ServiceName: "edge-eu-1"})
	tr, err := Setup(context.Background(), cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer tr.Shutdown(context.Background())
	fmt.Println("tracing on:", tr != nil)
}
