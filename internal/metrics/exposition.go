package metrics

import (
	"bytes"
	"math"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// This file holds the metric types and writes them in the Prometheus text
// exposition format, version 0.0.4:
// https://prometheus.io/docs/instrumenting/exposition_formats/

// contentType is the media type of the text exposition format.
const contentType = "text/plain; version=0.0.4; charset=utf-8"

// Metric kinds, the values of the TYPE lines.
const (
	kindCounter   = "counter"
	kindGauge     = "gauge"
	kindHistogram = "histogram"
)

// counter is a monotonic count.
type counter struct{ n atomic.Uint64 }

func (c *counter) inc() { c.n.Add(1) }

// gauge is an integer that goes up and down.
type gauge struct{ n atomic.Int64 }

func (g *gauge) set(v int64) { g.n.Store(v) }
func (g *gauge) inc()        { g.n.Add(1) }
func (g *gauge) dec()        { g.n.Add(-1) }

// histogram counts observations in buckets with fixed upper bounds and
// keeps their sum.
type histogram struct {
	bounds  []float64       // upper bounds, ascending; shared, read only
	counts  []atomic.Uint64 // per bucket (not cumulative); the last is +Inf
	sumBits atomic.Uint64   // math.Float64bits of the sum
}

func newHistogram(bounds []float64) *histogram {
	return &histogram{bounds: bounds, counts: make([]atomic.Uint64, len(bounds)+1)}
}

func (h *histogram) observe(v float64) {
	// The first bucket whose upper bound is >= v ("le" is inclusive).
	h.counts[sort.SearchFloat64s(h.bounds, v)].Add(1)
	for {
		old := h.sumBits.Load()
		if h.sumBits.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+v)) {
			return
		}
	}
}

// family is one metric name with its help text, kind, label names and
// series.
type family struct {
	kind, name, help string
	labels           []string  // label names, in the order of the values
	order            []int     // indexes of labels sorted by name: the output order
	buckets          []float64 // histograms only

	mu     sync.Mutex
	series []labeled
}

// labeled is one series of a family: its label pairs, formatted, and its
// value (*counter, *gauge or *histogram).
type labeled struct {
	labels string // `a="x",b="y"`, sorted by label name
	value  any
}

func newFamily(kind, name, help string, buckets []float64, labels ...string) *family {
	order := make([]int, len(labels))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return strings.Compare(labels[a], labels[b]) })
	return &family{kind: kind, name: name, help: help, labels: labels, order: order, buckets: buckets}
}

// add appends a series with the label values values (one per label name)
// and returns v. The callers' caches make sure each label combination is
// added once.
func add[T any](f *family, v T, values ...string) T {
	var b strings.Builder
	for i, j := range f.order {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(f.labels[j])
		b.WriteString(`="`)
		b.WriteString(escapeLabel(values[j]))
		b.WriteByte('"')
	}
	f.mu.Lock()
	f.series = append(f.series, labeled{labels: b.String(), value: v})
	f.mu.Unlock()
	return v
}

func (f *family) counter(values ...string) *counter { return add(f, &counter{}, values...) }
func (f *family) gauge(values ...string) *gauge     { return add(f, &gauge{}, values...) }
func (f *family) histogram(values ...string) *histogram {
	return add(f, newHistogram(f.buckets), values...)
}

// write appends the family in the text format, series sorted by labels;
// a family without series is left out.
func (f *family) write(b *bytes.Buffer) {
	f.mu.Lock()
	series := slices.Clone(f.series)
	f.mu.Unlock()
	if len(series) == 0 {
		return
	}
	slices.SortFunc(series, func(a, b labeled) int { return strings.Compare(a.labels, b.labels) })
	writeHeader(b, f.name, f.help, f.kind)
	for _, s := range series {
		switch v := s.value.(type) {
		case *counter:
			writeSample(b, f.name, s.labels, float64(v.n.Load()))
		case *gauge:
			writeSample(b, f.name, s.labels, float64(v.n.Load()))
		case *histogram:
			writeHistogram(b, f.name, s.labels, v)
		}
	}
}

func writeHistogram(b *bytes.Buffer, name, labels string, h *histogram) {
	sep := ""
	if labels != "" {
		sep = ","
	}
	var cum uint64
	for i := range h.counts {
		cum += h.counts[i].Load()
		le := "+Inf"
		if i < len(h.bounds) {
			le = formatFloat(h.bounds[i])
		}
		writeSample(b, name+"_bucket", labels+sep+`le="`+le+`"`, float64(cum))
	}
	writeSample(b, name+"_sum", labels, math.Float64frombits(h.sumBits.Load()))
	// The count is the +Inf bucket, so that the two always agree.
	writeSample(b, name+"_count", labels, float64(cum))
}

func writeHeader(b *bytes.Buffer, name, help, kind string) {
	b.WriteString("# HELP ")
	b.WriteString(name)
	b.WriteByte(' ')
	b.WriteString(helpEscaper.Replace(help))
	b.WriteString("\n# TYPE ")
	b.WriteString(name)
	b.WriteByte(' ')
	b.WriteString(kind)
	b.WriteByte('\n')
}

// writeSample writes one sample line; labels are formatted pairs.
func writeSample(b *bytes.Buffer, name, labels string, v float64) {
	b.WriteString(name)
	if labels != "" {
		b.WriteByte('{')
		b.WriteString(labels)
		b.WriteByte('}')
	}
	b.WriteByte(' ')
	b.WriteString(formatFloat(v))
	b.WriteByte('\n')
}

// formatFloat writes v as the text format wants it: Go's shortest
// representation, or +Inf, -Inf, NaN.
func formatFloat(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	case math.IsNaN(v):
		return "NaN"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

var (
	labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
	helpEscaper  = strings.NewReplacer(`\`, `\\`, "\n", `\n`)
)

// escapeLabel escapes a label value, replacing invalid UTF-8 (which the
// format does not allow) by U+FFFD.
func escapeLabel(v string) string {
	return labelEscaper.Replace(strings.ToValidUTF8(v, "\uFFFD"))
}

// serveHTTP writes every family, then the runtime and process metrics.
func (m *Metrics) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	var b bytes.Buffer
	for _, f := range m.families {
		f.write(&b)
	}
	if m.clientMem != nil {
		writeClientMemory(&b, m.clientMem())
	}
	if m.interceptors != nil {
		writeInterceptors(&b, m.interceptors())
	}
	writeRuntime(&b)
	writeProcess(&b)
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("Content-Length", strconv.Itoa(b.Len()))
	if r.Method == http.MethodGet {
		_, _ = w.Write(b.Bytes())
	}
}
