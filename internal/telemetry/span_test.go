package telemetry

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http/httptest"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// recordOne starts a span on a tracer exporting to a receiver, lets do act
// on it, and returns the one span exported.
func recordOne(t *testing.T, do func(trace.Span)) exportedSpan {
	t.Helper()
	rc := &receiver{}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	tr, err := Setup(t.Context(), Config{Endpoint: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	_, span := tr.Start(t.Context(), "op")
	do(span)
	span.End()
	if err := tr.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	spans := decodeSpans(t, rc.received())
	if len(spans) != 1 {
		t.Fatalf("exported %d spans, want 1", len(spans))
	}
	return spans[0]
}

func TestSpanStatus(t *testing.T) {
	tests := []struct {
		name string
		set  []status
		want status
	}{
		{"unset", nil, status{}},
		{"error", []status{{codes.Error, "boom"}}, status{codes.Error, "boom"}},
		{"error then ok", []status{{codes.Error, "boom"}, {codes.Ok, "ignored"}}, status{codes.Ok, ""}},
		{"ok is final", []status{{codes.Ok, ""}, {codes.Error, "late"}}, status{codes.Ok, ""}},
		{"unset does not clear error", []status{{codes.Error, "boom"}, {codes.Unset, ""}}, status{codes.Error, "boom"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := &Tracer{sample: constSampler(true), batch: &batcher{}}
			_, s := tr.Start(context.Background(), "op")
			for _, st := range tt.set {
				s.SetStatus(st.code, st.description)
			}
			s.End()
			if got := tr.batch.queue[0].status; got != tt.want {
				t.Errorf("status = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestSpanAttributes(t *testing.T) {
	got := recordOne(t, func(s trace.Span) {
		s.SetAttributes(attribute.String("a", "1"), attribute.String("b", "2"))
		s.SetAttributes(attribute.String("a", "replaced"))
		s.SetName("renamed")
	})
	if got.name != "renamed" || got.attrs["a"] != "replaced" || got.attrs["b"] != "2" || len(got.attrs) != 2 {
		t.Errorf("span = %+v", got)
	}
}

func TestSpanLimitsAndEnd(t *testing.T) {
	tr := &Tracer{sample: constSampler(true), batch: &batcher{}}
	_, s := tr.Start(context.Background(), "op")
	for i := range maxAttributes + 5 {
		s.SetAttributes(attribute.Int(fmt.Sprint("k", i), i))
	}
	for range maxEvents + 2 {
		s.AddEvent("e")
	}
	s.RecordError(errors.New("boom"))
	s.End()
	if s.IsRecording() {
		t.Error("span records after End")
	}
	s.SetAttributes(attribute.Int("after", 1))
	s.End() // a second End is ignored
	d := s.(*span).data
	if len(d.attrs) != maxAttributes || d.droppedAttrs != 5 || len(d.events) != maxEvents || d.droppedEvents != 3 {
		t.Errorf("attrs %d (+%d dropped), events %d (+%d dropped)", len(d.attrs), d.droppedAttrs, len(d.events), d.droppedEvents)
	}
	if q := tr.batch.queue; len(q) != 1 {
		t.Errorf("queued %d spans after two Ends, want 1", len(q))
	}
}

func TestRatioSampler(t *testing.T) {
	tests := []struct{ ratio float64 }{{0}, {0.01}, {0.25}, {0.5}, {1}}
	const n = 20000
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.ratio), func(t *testing.T) {
			s := ratioSampler(tt.ratio)
			k := 0
			for range n {
				if s(trace.SpanContext{}, newTraceID()) {
					k++
				}
			}
			// Within 5 standard deviations of the binomial mean.
			mean, sd := tt.ratio*n, math.Sqrt(n*tt.ratio*(1-tt.ratio))
			if math.Abs(float64(k)-mean) > 5*sd+0.5 {
				t.Errorf("sampled %d of %d, want about %.0f", k, n, mean)
			}
		})
	}
}

// TestUnsampledSpanPropagates: a span the sampler drops is not recorded,
// but its context still reaches the upstream, with the sampled flag off.
func TestUnsampledSpanPropagates(t *testing.T) {
	tr, err := Setup(t.Context(), Config{Endpoint: "http://127.0.0.1:1", Sampler: SamplerParentBasedAlwaysOff})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Shutdown(t.Context())
	ctx, s := tr.Start(t.Context(), "op")
	sc := s.SpanContext()
	if s.IsRecording() || !sc.IsValid() || sc.IsSampled() {
		t.Fatalf("span recording=%v context=%v", s.IsRecording(), sc)
	}
	if got := trace.SpanContextFromContext(ExtractMeta(context.Background(), InjectMeta(ctx, nil))); !got.Equal(sc.WithRemote(true)) {
		t.Errorf("propagated %v, want %v", got, sc)
	}
}

// TestBatchExportsFullBatch: a full batch is exported without waiting for
// the batch delay or Shutdown.
func TestBatchExportsFullBatch(t *testing.T) {
	rc := &receiver{}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	tr, err := Setup(t.Context(), Config{Endpoint: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Shutdown(t.Context())
	for range maxBatch {
		_, s := tr.Start(t.Context(), "op")
		s.End()
	}
	deadline := time.Now().Add(batchDelay / 2)
	for rc.attemptCount() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("a full batch was not exported before the batch delay")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
