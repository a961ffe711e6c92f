package telemetry

import (
	"encoding/base64"
	"encoding/json"
	"math"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// The types below are the OTLP/JSON form of an ExportTraceServiceRequest
// (opentelemetry/proto/collector/trace/v1): field names in lowerCamelCase,
// trace and span ids as lowercase hex, 64-bit integers as decimal strings,
// enums as integers and default values left out.

type exportRequest struct {
	ResourceSpans []resourceSpans `json:"resourceSpans"`
}

type resourceSpans struct {
	Resource   *resourceJSON `json:"resource,omitempty"`
	ScopeSpans []*scopeSpans `json:"scopeSpans"`
	SchemaURL  string        `json:"schemaUrl,omitempty"`
}

type resourceJSON struct {
	Attributes []keyValue `json:"attributes,omitempty"`
}

type scopeSpans struct {
	Scope     *scopeJSON `json:"scope,omitempty"`
	Spans     []spanJSON `json:"spans"`
	SchemaURL string     `json:"schemaUrl,omitempty"`
}

type scopeJSON struct {
	Name       string     `json:"name,omitempty"`
	Version    string     `json:"version,omitempty"`
	Attributes []keyValue `json:"attributes,omitempty"`
}

type spanJSON struct {
	TraceID                string      `json:"traceId"`
	SpanID                 string      `json:"spanId"`
	TraceState             string      `json:"traceState,omitempty"`
	ParentSpanID           string      `json:"parentSpanId,omitempty"`
	Flags                  uint32      `json:"flags,omitempty"`
	Name                   string      `json:"name"`
	Kind                   int         `json:"kind"`
	StartTimeUnixNano      string      `json:"startTimeUnixNano"`
	EndTimeUnixNano        string      `json:"endTimeUnixNano"`
	Attributes             []keyValue  `json:"attributes,omitempty"`
	DroppedAttributesCount uint32      `json:"droppedAttributesCount,omitempty"`
	Events                 []eventJSON `json:"events,omitempty"`
	DroppedEventsCount     uint32      `json:"droppedEventsCount,omitempty"`
	Links                  []linkJSON  `json:"links,omitempty"`
	DroppedLinksCount      uint32      `json:"droppedLinksCount,omitempty"`
	Status                 statusJSON  `json:"status"`
}

type eventJSON struct {
	TimeUnixNano           string     `json:"timeUnixNano"`
	Name                   string     `json:"name"`
	Attributes             []keyValue `json:"attributes,omitempty"`
	DroppedAttributesCount uint32     `json:"droppedAttributesCount,omitempty"`
}

type linkJSON struct {
	TraceID                string     `json:"traceId"`
	SpanID                 string     `json:"spanId"`
	TraceState             string     `json:"traceState,omitempty"`
	Attributes             []keyValue `json:"attributes,omitempty"`
	DroppedAttributesCount uint32     `json:"droppedAttributesCount,omitempty"`
	Flags                  uint32     `json:"flags,omitempty"`
}

// statusJSON is a span status. Its code is always written, as in the
// OTLP/JSON examples; 0 (unset) would also be valid left out.
type statusJSON struct {
	Message string `json:"message,omitempty"`
	Code    int    `json:"code"`
}

type keyValue struct {
	Key   string   `json:"key"`
	Value anyValue `json:"value"`
}

// anyValue is an OTLP AnyValue: at most one field is set; none is the empty
// value.
type anyValue struct {
	StringValue *string       `json:"stringValue,omitempty"`
	BoolValue   *bool         `json:"boolValue,omitempty"`
	IntValue    *string       `json:"intValue,omitempty"` // int64 as a decimal string
	DoubleValue *double       `json:"doubleValue,omitempty"`
	ArrayValue  *arrayValue   `json:"arrayValue,omitempty"`
	KvlistValue *keyValueList `json:"kvlistValue,omitempty"`
	BytesValue  *string       `json:"bytesValue,omitempty"` // standard base64
}

type arrayValue struct {
	Values []anyValue `json:"values,omitempty"`
}

type keyValueList struct {
	Values []keyValue `json:"values,omitempty"`
}

// double is a float64 written as the protobuf JSON mapping wants it: a JSON
// number, or the string "NaN", "Infinity" or "-Infinity", which
// encoding/json cannot write for a float64.
type double float64

// MarshalJSON implements json.Marshaler.
func (d double) MarshalJSON() ([]byte, error) {
	f := float64(d)
	switch {
	case math.IsNaN(f):
		return []byte(`"NaN"`), nil
	case math.IsInf(f, 1):
		return []byte(`"Infinity"`), nil
	case math.IsInf(f, -1):
		return []byte(`"-Infinity"`), nil
	}
	return json.Marshal(f)
}

// Bits of the OTLP Span.flags and Span.Link.flags fields above the W3C
// trace flags (SpanFlags in trace.proto).
const (
	flagHasIsRemote = 0x100
	flagIsRemote    = 0x200
)

// encodeSpans returns the OTLP/JSON export request for spans, grouped by
// resource and then by instrumentation scope in the order they first
// appear.
func encodeSpans(spans []*spanData) ([]byte, error) {
	type scopeKey struct {
		resource *resourceInfo
		scope    scopeInfo
	}
	req := exportRequest{ResourceSpans: []resourceSpans{}}
	resources := map[*resourceInfo]int{} // index in req.ResourceSpans
	scopes := map[scopeKey]*scopeSpans{}
	for _, s := range spans {
		if s == nil {
			continue
		}
		ri, ok := resources[s.resource]
		if !ok {
			ri = len(req.ResourceSpans)
			resources[s.resource] = ri
			rs := resourceSpans{ScopeSpans: []*scopeSpans{}}
			if res := s.resource; res != nil {
				rs.Resource = &resourceJSON{Attributes: keyValues(res.attrs)}
				rs.SchemaURL = res.schemaURL
			}
			req.ResourceSpans = append(req.ResourceSpans, rs)
		}
		skey := scopeKey{s.resource, s.scope}
		ss, ok := scopes[skey]
		if !ok {
			ss = &scopeSpans{SchemaURL: s.scope.schemaURL}
			if s.scope != (scopeInfo{}) {
				ss.Scope = &scopeJSON{Name: s.scope.name, Version: s.scope.version}
			}
			scopes[skey] = ss
			req.ResourceSpans[ri].ScopeSpans = append(req.ResourceSpans[ri].ScopeSpans, ss)
		}
		ss.Spans = append(ss.Spans, encodeSpan(s))
	}
	return json.Marshal(req)
}

func encodeSpan(s *spanData) spanJSON {
	sc := s.sc
	out := spanJSON{
		TraceID:                sc.TraceID().String(),
		SpanID:                 sc.SpanID().String(),
		TraceState:             sc.TraceState().String(),
		Flags:                  spanFlags(sc.TraceFlags(), s.parent),
		Name:                   s.name,
		Kind:                   spanKind(s.kind),
		StartTimeUnixNano:      unixNano(s.start),
		EndTimeUnixNano:        unixNano(s.end),
		Attributes:             keyValues(s.attrs),
		DroppedAttributesCount: clampUint32(s.droppedAttrs),
		DroppedEventsCount:     clampUint32(s.droppedEvents),
		DroppedLinksCount:      clampUint32(s.droppedLinks),
		Status:                 spanStatus(s.status),
	}
	if parent := s.parent.SpanID(); parent.IsValid() {
		out.ParentSpanID = parent.String()
	}
	for _, e := range s.events {
		out.Events = append(out.Events, eventJSON{
			TimeUnixNano:           unixNano(e.time),
			Name:                   e.name,
			Attributes:             keyValues(e.attrs),
			DroppedAttributesCount: clampUint32(e.droppedAttrs),
		})
	}
	for _, l := range s.links {
		out.Links = append(out.Links, linkJSON{
			TraceID:                l.sc.TraceID().String(),
			SpanID:                 l.sc.SpanID().String(),
			TraceState:             l.sc.TraceState().String(),
			Attributes:             keyValues(l.attrs),
			DroppedAttributesCount: clampUint32(l.droppedAttrs),
			Flags:                  spanFlags(l.sc.TraceFlags(), l.sc),
		})
	}
	return out
}

// spanFlags returns the OTLP flags of a span (or link) with trace flags tf
// whose parent (or linked span) is parent: the W3C trace flags, and whether
// parent is remote.
func spanFlags(tf trace.TraceFlags, parent trace.SpanContext) uint32 {
	flags := uint32(tf) | flagHasIsRemote
	if parent.IsRemote() {
		flags |= flagIsRemote
	}
	return flags
}

// spanKind maps a span kind to the OTLP SpanKind enum.
func spanKind(k trace.SpanKind) int {
	switch k {
	case trace.SpanKindInternal:
		return 1
	case trace.SpanKindServer:
		return 2
	case trace.SpanKindClient:
		return 3
	case trace.SpanKindProducer:
		return 4
	case trace.SpanKindConsumer:
		return 5
	default:
		return 0 // SPAN_KIND_UNSPECIFIED
	}
}

// spanStatus maps a span status to the OTLP Status, whose codes differ from
// the API's: UNSET 0, OK 1, ERROR 2.
func spanStatus(s status) statusJSON {
	switch s.code {
	case codes.Ok:
		return statusJSON{Code: 1}
	case codes.Error:
		return statusJSON{Code: 2, Message: s.description}
	default:
		return statusJSON{}
	}
}

// unixNano returns t as nanoseconds since the Unix epoch in a decimal
// string, "0" for the zero time or a time before the epoch.
func unixNano(t time.Time) string {
	if t.IsZero() {
		return "0"
	}
	return strconv.FormatInt(max(0, t.UnixNano()), 10)
}

// clampUint32 returns n clamped to the range of a uint32. It computes in
// int64 so that it also builds where int is 32 bits (linux/arm).
func clampUint32(n int) uint32 {
	return uint32(min(max(int64(n), 0), math.MaxUint32))
}

func keyValues(attrs []attribute.KeyValue) []keyValue {
	if len(attrs) == 0 {
		return nil
	}
	out := make([]keyValue, len(attrs))
	for i, kv := range attrs {
		out[i] = keyValue{Key: string(kv.Key), Value: valueOf(kv.Value)}
	}
	return out
}

// valueOf maps an attribute value to an OTLP AnyValue; slices become an
// arrayValue and maps a kvlistValue.
func valueOf(v attribute.Value) anyValue {
	switch v.Type() {
	case attribute.EMPTY:
		return anyValue{}
	case attribute.BOOL:
		return anyValue{BoolValue: new(v.AsBool())}
	case attribute.INT64:
		return intValue(v.AsInt64())
	case attribute.FLOAT64:
		return anyValue{DoubleValue: new(double(v.AsFloat64()))}
	case attribute.STRING:
		return anyValue{StringValue: new(v.AsString())}
	case attribute.BYTESLICE:
		return anyValue{BytesValue: new(base64.StdEncoding.EncodeToString(v.AsByteSlice()))}
	case attribute.BOOLSLICE:
		return arrayOf(v.AsBoolSlice(), func(b bool) anyValue { return anyValue{BoolValue: new(b)} })
	case attribute.INT64SLICE:
		return arrayOf(v.AsInt64Slice(), intValue)
	case attribute.FLOAT64SLICE:
		return arrayOf(v.AsFloat64Slice(), func(f float64) anyValue { return anyValue{DoubleValue: new(double(f))} })
	case attribute.STRINGSLICE:
		return arrayOf(v.AsStringSlice(), func(s string) anyValue { return anyValue{StringValue: new(s)} })
	case attribute.SLICE:
		return arrayOf(v.AsSlice(), valueOf)
	case attribute.MAP:
		return anyValue{KvlistValue: &keyValueList{Values: keyValues(v.AsMap())}}
	default:
		return anyValue{StringValue: new("INVALID")} // as the OTLP exporters of the Go SDK do
	}
}

func intValue(n int64) anyValue {
	return anyValue{IntValue: new(strconv.FormatInt(n, 10))}
}

func arrayOf[T any](vals []T, conv func(T) anyValue) anyValue {
	arr := &arrayValue{}
	if len(vals) > 0 {
		arr.Values = make([]anyValue, len(vals))
		for i, v := range vals {
			arr.Values[i] = conv(v)
		}
	}
	return anyValue{ArrayValue: arr}
}
