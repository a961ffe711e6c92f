// Package telemetry sets up OpenTelemetry tracing for the gateway and carries
// W3C trace context through MCP messages.
//
// Spans implement the OpenTelemetry trace API (go.opentelemetry.io/otel/trace)
// with a small tracer of our own instead of the OpenTelemetry SDK: the
// standard samplers, a batching queue, and an exporter sending to an
// OTLP/HTTP collector with the OTLP JSON encoding (Content-Type
// application/json), which the OpenTelemetry Collector, Jaeger and Tempo
// accept; it needs neither gRPC nor the protobuf runtime.
//
// Tracing is off unless an OTLP/HTTP endpoint is configured (and the sampler
// is not always_off): Setup then returns a nil *Tracer, whose methods cost a
// nil check, and no tracing goroutine or state exists. FromEnv completes a
// Config from the standard OTEL_* environment variables. No global
// OpenTelemetry state is touched.
//
// InjectMeta and ExtractMeta move the W3C "traceparent" and "tracestate"
// values in and out of the "_meta" object of an MCP request's params, so a
// client's trace continues through the gateway to the upstream server.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/url"
	"strings"

	"log/slog"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// DefaultServiceName is the service.name resource attribute used when
// Config.ServiceName is empty.
const DefaultServiceName = "edge-mcp"

// instrumentationName names the gateway's tracer.
const instrumentationName = "github.com/edge-mcp/edge-mcp"

// defaultTracesPath is the OTLP/HTTP path used when the endpoint has none.
const defaultTracesPath = "/v1/traces"

var (
	// ErrInvalidConfig is returned by Setup for a configuration it cannot
	// use.
	ErrInvalidConfig = errors.New("invalid telemetry configuration")
)

// Config configures tracing.
type Config struct {
	// Endpoint is the OTLP/HTTP collector, as "http(s)://host:port" with an
	// optional path (default "/v1/traces"), or "host:port". Empty disables
	// tracing.
	Endpoint string
	// ServiceName is the service.name resource attribute; empty means
	// DefaultServiceName.
	ServiceName string
	// SampleRatio is the fraction of new traces that are sampled by the
	// ratio samplers, in [0, 1]; 0 means 1 (sample everything). With the
	// default sampler, traces started by a client follow the client's
	// sampling decision.
	SampleRatio float64
	// Headers are sent with every export request, for example for
	// authentication.
	Headers map[string]string
	// Insecure selects plain HTTP for an Endpoint given without a scheme;
	// an explicit http:// or https:// scheme takes precedence.
	Insecure bool
	// Compression is the export request compression: "gzip", or "" for
	// none.
	Compression string
	// Sampler is one of the Sampler constants; "" means
	// SamplerParentBasedRatio.
	Sampler string

	// Logger receives export failures; nil means slog.Default().
	Logger *slog.Logger

	// envErr is what FromEnv could not use; Setup reports it.
	envErr error
}

// Tracer starts spans and exports them over OTLP/HTTP. A nil *Tracer is a
// disabled tracer: Start returns the context unchanged and a no-op span.
type Tracer struct {
	sample   sampler
	resource *resourceInfo
	scope    scopeInfo
	batch    *batcher
	log      *slog.Logger
}

// Setup returns a Tracer exporting to cfg.Endpoint, or a nil *Tracer and no
// error when cfg.Endpoint is empty or cfg.Sampler is SamplerAlwaysOff. No connection is made until spans are
// exported, so ctx is not used.
func Setup(ctx context.Context, cfg Config) (*Tracer, error) {
	if cfg.envErr != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, cfg.envErr)
	}
	if cfg.Endpoint == "" || cfg.Sampler == SamplerAlwaysOff {
		return nil, nil
	}
	sampler, err := samplerOf(cfg)
	if err != nil {
		return nil, err
	}
	target, err := exportURL(cfg)
	if err != nil {
		return nil, err
	}
	var gzip bool
	switch cfg.Compression {
	case "":
	case "gzip":
		gzip = true
	default:
		return nil, fmt.Errorf("%w: compression %q is not \"gzip\" or empty", ErrInvalidConfig, cfg.Compression)
	}
	name := cfg.ServiceName
	if name == "" {
		name = DefaultServiceName
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	t := &Tracer{
		sample:   sampler,
		resource: &resourceInfo{attrs: []attribute.KeyValue{attribute.String("service.name", name)}},
		scope:    scopeInfo{name: instrumentationName},
		log:      log,
	}
	t.batch = newBatcher(newExporter(target, cfg.Headers, gzip), func(err error) {
		log.Warn("exporting trace spans", "err", err)
	})
	return t, nil
}

// samplerOf returns the sampler cfg.Sampler and cfg.SampleRatio select.
func samplerOf(cfg Config) (sampler, error) {
	ratio := cfg.SampleRatio
	if ratio < 0 || ratio > 1 || math.IsNaN(ratio) {
		return nil, fmt.Errorf("%w: sample ratio %v is outside [0, 1]", ErrInvalidConfig, ratio)
	}
	if ratio == 0 {
		ratio = 1
	}
	switch cfg.Sampler {
	case "", SamplerParentBasedRatio:
		return parentBased(ratioSampler(ratio)), nil
	case SamplerRatio:
		return ratioSampler(ratio), nil
	case SamplerAlwaysOn:
		return constSampler(true), nil
	case SamplerParentBasedAlwaysOn:
		return parentBased(constSampler(true)), nil
	case SamplerParentBasedAlwaysOff:
		return parentBased(constSampler(false)), nil
	}
	return nil, fmt.Errorf("%w: unknown sampler %q", ErrInvalidConfig, cfg.Sampler)
}

// exportURL returns the URL export requests are posted to: cfg.Endpoint
// with a scheme (https, or http when cfg.Insecure) when it has none and
// with defaultTracesPath when it has no path.
func exportURL(cfg Config) (string, error) {
	endpoint := cfg.Endpoint
	if !strings.Contains(endpoint, "://") {
		scheme := "https://"
		if cfg.Insecure {
			scheme = "http://"
		}
		endpoint = scheme + endpoint
	}
	u, err := url.Parse(endpoint)
	if err != nil {
		return "", fmt.Errorf("%w: endpoint %q: %w", ErrInvalidConfig, cfg.Endpoint, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", fmt.Errorf("%w: endpoint %q: scheme must be http or https", ErrInvalidConfig, cfg.Endpoint)
	}
	if u.Host == "" {
		return "", fmt.Errorf("%w: endpoint %q has no host", ErrInvalidConfig, cfg.Endpoint)
	}
	path := u.EscapedPath()
	if path == "" || path == "/" {
		path = defaultTracesPath
	}
	return u.Scheme + "://" + u.Host + path, nil
}

// Start starts a span named name as a child of the span in ctx, if any, and
// returns a context carrying it. The caller must End the span. On a nil
// *Tracer it returns ctx unchanged and a no-op span, so trace context
// extracted from a client still passes through.
func (t *Tracer) Start(ctx context.Context, name string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	if t == nil {
		return ctx, trace.SpanFromContext(context.Background())
	}
	return t.start(ctx, name, attrs)
}

// Shutdown exports every ended span and stops the tracer. It is a no-op on
// a nil *Tracer.
func (t *Tracer) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	if err := t.batch.shutdown(ctx); err != nil {
		return fmt.Errorf("shutting down tracer: %w", err)
	}
	if n := t.batch.droppedCount(); n > 0 {
		t.log.Warn("trace spans dropped: the export queue was full", "spans", n)
	}
	return nil
}
