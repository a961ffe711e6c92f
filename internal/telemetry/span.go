package telemetry

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"
	"go.opentelemetry.io/otel/trace/noop"
)

// This file is the gateway's own span implementation of the OpenTelemetry
// trace API: what the SDK did for us, reduced to what the gateway uses
// (one resource, one instrumentation scope, the standard samplers).

// Limits per span, as the SDK's defaults; what is over them is counted as
// dropped.
const (
	maxAttributes = 128
	maxEvents     = 128
	maxLinks      = 128
)

// resourceInfo is the resource spans are exported with.
type resourceInfo struct {
	attrs     []attribute.KeyValue
	schemaURL string
}

// scopeInfo is an instrumentation scope.
type scopeInfo struct {
	name, version, schemaURL string
}

// event is a span event.
type event struct {
	name         string
	time         time.Time
	attrs        []attribute.KeyValue
	droppedAttrs int
}

// link is a link to another span.
type link struct {
	sc           trace.SpanContext
	attrs        []attribute.KeyValue
	droppedAttrs int
}

// status is a span status.
type status struct {
	code        codes.Code
	description string
}

// spanData is an ended span, as the exporter encodes it.
type spanData struct {
	name          string
	sc, parent    trace.SpanContext
	kind          trace.SpanKind
	start, end    time.Time
	attrs         []attribute.KeyValue
	events        []event
	links         []link
	droppedAttrs  int
	droppedEvents int
	droppedLinks  int
	status        status
	resource      *resourceInfo
	scope         scopeInfo
}

// sampler decides whether a new span with trace id tid and parent (maybe
// invalid) is sampled.
type sampler func(parent trace.SpanContext, tid trace.TraceID) bool

// ratioSampler samples the share ratio of trace ids, by the same rule as
// the SDK's TraceIDRatioBased, so that services sharing a ratio agree.
func ratioSampler(ratio float64) sampler {
	if ratio >= 1 {
		return func(trace.SpanContext, trace.TraceID) bool { return true }
	}
	bound := uint64(ratio * (1 << 63))
	return func(_ trace.SpanContext, tid trace.TraceID) bool {
		return binary.BigEndian.Uint64(tid[8:16])>>1 < bound
	}
}

func constSampler(on bool) sampler {
	return func(trace.SpanContext, trace.TraceID) bool { return on }
}

// parentBased follows a valid parent's sampled flag and asks root for root
// spans.
func parentBased(root sampler) sampler {
	return func(parent trace.SpanContext, tid trace.TraceID) bool {
		if parent.IsValid() {
			return parent.IsSampled()
		}
		return root(parent, tid)
	}
}

// start starts a span as a child of the span in ctx.
func (t *Tracer) start(ctx context.Context, name string, attrs []attribute.KeyValue) (context.Context, trace.Span) {
	parent := trace.SpanContextFromContext(ctx)
	cfg := trace.SpanContextConfig{TraceID: parent.TraceID(), SpanID: newSpanID(), TraceState: parent.TraceState()}
	if !parent.IsValid() {
		cfg.TraceID, cfg.TraceState = newTraceID(), trace.TraceState{}
	}
	if !t.sample(parent, cfg.TraceID) {
		// Not recorded, but the context carries the new span's ids (flags
		// 00) on to the upstream, as the SDK does.
		ctx = trace.ContextWithSpanContext(ctx, trace.NewSpanContext(cfg))
		return ctx, trace.SpanFromContext(ctx)
	}
	cfg.TraceFlags = trace.FlagsSampled
	s := &span{tracer: t, data: spanData{
		name: name, sc: trace.NewSpanContext(cfg), parent: parent, kind: trace.SpanKindInternal,
		start: time.Now(), resource: t.resource, scope: t.scope,
	}}
	s.setAttributes(attrs)
	return trace.ContextWithSpan(ctx, s), s
}

func newTraceID() (id trace.TraceID) {
	for !id.IsValid() {
		binary.BigEndian.PutUint64(id[:8], rand.Uint64())
		binary.BigEndian.PutUint64(id[8:], rand.Uint64())
	}
	return id
}

func newSpanID() (id trace.SpanID) {
	for !id.IsValid() {
		binary.BigEndian.PutUint64(id[:], rand.Uint64())
	}
	return id
}

// span is a recording span. Its methods are safe for concurrent use; after
// End they do nothing.
type span struct {
	embedded.Span
	tracer *Tracer

	mu    sync.Mutex
	data  spanData
	ended bool
}

var _ trace.Span = (*span)(nil)

// End ends the span and queues it for export.
func (s *span) End(options ...trace.SpanEndOption) {
	end := time.Now()
	if len(options) > 0 {
		cfg := trace.NewSpanEndConfig(options...)
		if ts := cfg.Timestamp(); !ts.IsZero() {
			end = ts
		}
	}
	s.mu.Lock()
	if s.ended {
		s.mu.Unlock()
		return
	}
	s.ended = true
	s.data.end = end
	data := s.data
	s.mu.Unlock()
	s.tracer.batch.add(&data)
}

// AddEvent records an event.
func (s *span) AddEvent(name string, options ...trace.EventOption) {
	cfg := trace.NewEventConfig(options...)
	attrs := cfg.Attributes()
	ev := event{name: name, time: cfg.Timestamp()}
	if ev.time.IsZero() {
		ev.time = time.Now()
	}
	ev.attrs, ev.droppedAttrs = capped(attrs, maxAttributes)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return
	}
	if len(s.data.events) >= maxEvents {
		s.data.droppedEvents++
		return
	}
	s.data.events = append(s.data.events, ev)
}

// AddLink records a link to another span.
func (s *span) AddLink(l trace.Link) {
	if !l.SpanContext.IsValid() {
		return
	}
	lk := link{sc: l.SpanContext}
	lk.attrs, lk.droppedAttrs = capped(l.Attributes, maxAttributes)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return
	}
	if len(s.data.links) >= maxLinks {
		s.data.droppedLinks++
		return
	}
	s.data.links = append(s.data.links, lk)
}

// IsRecording reports whether the span has not ended yet.
func (s *span) IsRecording() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.ended
}

// RecordError records err as an "exception" event; it does not change the
// status.
func (s *span) RecordError(err error, options ...trace.EventOption) {
	if err == nil {
		return
	}
	options = append(options, trace.WithAttributes(
		attribute.String("exception.type", typeName(err)),
		attribute.String("exception.message", err.Error())))
	s.AddEvent("exception", options...)
}

// SpanContext returns the span's ids and flags.
func (s *span) SpanContext() trace.SpanContext { return s.data.sc } // immutable

// SetStatus sets the status, as the SDK does: Ok is final, Error can still
// become Ok, and the description is kept for Error only.
func (s *span) SetStatus(code codes.Code, description string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	// Unset (0) < Error (1) < Ok (2): a status never goes down.
	if s.ended || code < s.data.status.code {
		return
	}
	st := status{code: code}
	if code == codes.Error {
		st.description = description
	}
	s.data.status = st
}

// SetName renames the span.
func (s *span) SetName(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.ended {
		s.data.name = name
	}
}

// SetAttributes sets attributes, replacing those of the same keys.
func (s *span) SetAttributes(kv ...attribute.KeyValue) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.ended {
		s.setAttributes(kv)
	}
}

func (s *span) setAttributes(kv []attribute.KeyValue) {
	for _, a := range kv {
		if !a.Valid() {
			s.data.droppedAttrs++
			continue
		}
		replaced := false
		for i := range s.data.attrs {
			if s.data.attrs[i].Key == a.Key {
				s.data.attrs[i], replaced = a, true
				break
			}
		}
		switch {
		case replaced:
		case len(s.data.attrs) < maxAttributes:
			s.data.attrs = append(s.data.attrs, a)
		default:
			s.data.droppedAttrs++
		}
	}
}

// TracerProvider returns a no-op provider: the gateway's tracer is not
// handed out through spans.
func (s *span) TracerProvider() trace.TracerProvider { return noop.NewTracerProvider() }

// capped returns at most max of attrs and how many it left out.
func capped(attrs []attribute.KeyValue, limit int) ([]attribute.KeyValue, int) {
	if len(attrs) <= limit {
		return attrs, 0
	}
	return attrs[:limit], len(attrs) - limit
}

func typeName(err error) string {
	return fmt.Sprintf("%T", err)
}

// Batching, as the SDK's batch span processor: spans are exported in
// batches of up to maxBatch, at the latest batchDelay after the first one
// of a batch ended; at most maxQueue wait, later ones are dropped.
const (
	maxQueue   = 2048
	maxBatch   = 512
	batchDelay = 5 * time.Second
)

// batcher queues ended spans and exports them from one goroutine.
type batcher struct {
	exp     *exporter
	onError func(error)

	mu      sync.Mutex
	queue   []*spanData
	dropped int
	stopped bool
	wake    chan struct{} // a full batch is waiting
	flush   chan chan struct{}
	done    chan struct{}
}

func newBatcher(exp *exporter, onError func(error)) *batcher {
	b := &batcher{exp: exp, onError: onError, wake: make(chan struct{}, 1),
		flush: make(chan chan struct{}), done: make(chan struct{})}
	go b.run()
	return b
}

func (b *batcher) add(s *spanData) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopped || len(b.queue) >= maxQueue {
		b.dropped++
		return
	}
	b.queue = append(b.queue, s)
	if len(b.queue) >= maxBatch {
		select {
		case b.wake <- struct{}{}:
		default:
		}
	}
}

func (b *batcher) run() {
	timer := time.NewTimer(batchDelay)
	defer timer.Stop()
	for {
		select {
		case <-b.wake:
		case <-timer.C:
		case ack := <-b.flush:
			b.exportAll()
			close(ack)
			if b.isStopped() {
				close(b.done)
				return
			}
			continue
		}
		b.exportAll()
		timer.Reset(batchDelay)
	}
}

func (b *batcher) isStopped() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.stopped
}

// exportAll exports what is queued, in batches.
func (b *batcher) exportAll() {
	for {
		b.mu.Lock()
		n := min(len(b.queue), maxBatch)
		batch := b.queue[:n:n]
		b.queue = b.queue[n:]
		b.mu.Unlock()
		if n == 0 {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), requestTimeout+maxRetryDelay)
		err := b.exp.ExportSpans(ctx, batch)
		cancel()
		if err != nil && b.onError != nil {
			b.onError(err)
		}
	}
}

// droppedCount returns how many spans were dropped.
func (b *batcher) droppedCount() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.dropped
}

// shutdown exports what is queued and stops; spans ending later are
// dropped. ctx bounds the wait.
func (b *batcher) shutdown(ctx context.Context) error {
	b.mu.Lock()
	if b.stopped {
		b.mu.Unlock()
		return nil
	}
	b.stopped = true
	b.mu.Unlock()
	ack := make(chan struct{})
	select {
	case b.flush <- ack:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-ack:
	case <-ctx.Done():
		return ctx.Err()
	}
	return b.exp.Shutdown(ctx)
}
