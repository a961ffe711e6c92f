package telemetry

import (
	"bytes"
	"context"
	"encoding/json"
	"io"

	"go.opentelemetry.io/otel/propagation"
)

// Keys of the W3C trace context inside an MCP "_meta" object.
const (
	metaKey        = "_meta"
	traceparentKey = "traceparent"
	tracestateKey  = "tracestate"
)

var traceContext propagation.TraceContext

// InjectMeta returns params, the JSON object of an MCP request's params,
// with the W3C trace context of ctx stored as "traceparent" (and
// "tracestate" when ctx has one) in its "_meta" object. "_meta" is created
// when absent or null; earlier trace context in it is replaced. Every other
// member of params and of "_meta" keeps its key and value byte for byte
// (whitespace between members is not kept).
//
// params is returned unchanged when ctx carries no valid span context, when
// params is not a JSON object (empty and null count as {}) or when its
// "_meta" is neither an object nor null.
func InjectMeta(ctx context.Context, params json.RawMessage) json.RawMessage {
	carrier := propagation.MapCarrier{}
	traceContext.Inject(ctx, carrier)
	if carrier[traceparentKey] == "" {
		return params
	}
	trimmed := bytes.TrimSpace(params)
	if len(trimmed) == 0 || string(trimmed) == "null" {
		return joinObject([]member{{rawKey: quote(metaKey), value: metaObject(nil, carrier)}})
	}
	members, ok := splitObject(params)
	if !ok {
		return params
	}
	found := false
	for i, m := range members {
		if m.key != metaKey {
			continue
		}
		var inner []member
		if string(m.value) != "null" {
			if inner, ok = splitObject(m.value); !ok {
				return params
			}
		}
		members[i].value = metaObject(inner, carrier)
		found = true
	}
	if !found {
		members = append(members, member{rawKey: quote(metaKey), value: metaObject(nil, carrier)})
	}
	return joinObject(members)
}

// ExtractMeta returns ctx carrying the remote span context found in the
// "_meta" object of params, the JSON object of an MCP request's params. It
// returns ctx unchanged when params holds no valid trace context.
func ExtractMeta(ctx context.Context, params json.RawMessage) context.Context {
	members, ok := splitObject(params)
	if !ok {
		return ctx
	}
	var meta json.RawMessage
	for _, m := range members {
		if m.key == metaKey {
			meta = m.value // the last one wins, as in encoding/json
		}
	}
	if meta == nil {
		return ctx
	}
	inner, ok := splitObject(meta)
	if !ok {
		return ctx
	}
	carrier := propagation.MapCarrier{}
	for _, m := range inner {
		if m.key != traceparentKey && m.key != tracestateKey {
			continue
		}
		var s string
		if json.Unmarshal(m.value, &s) == nil {
			carrier[m.key] = s
		}
	}
	if carrier[traceparentKey] == "" {
		return ctx
	}
	return traceContext.Extract(ctx, carrier)
}

// metaObject returns the members of a "_meta" object without trace context,
// followed by the trace context in carrier.
func metaObject(members []member, carrier propagation.MapCarrier) json.RawMessage {
	out := members[:0:0]
	for _, m := range members {
		if m.key != traceparentKey && m.key != tracestateKey {
			out = append(out, m)
		}
	}
	for _, k := range []string{traceparentKey, tracestateKey} {
		if v := carrier[k]; v != "" {
			out = append(out, member{rawKey: quote(k), value: quote(v)})
		}
	}
	return joinObject(out)
}

// member is one member of a JSON object: its decoded key and the exact
// bytes of its key and value.
type member struct {
	key    string
	rawKey []byte
	value  []byte
}

// splitObject splits the JSON object data into its members. It reports
// false when data is not a single valid JSON object.
func splitObject(data []byte) ([]member, bool) {
	if !json.Valid(data) {
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, false
	}
	var members []member
	prev := int(dec.InputOffset())
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, false
		}
		key, ok := tok.(string)
		if !ok {
			return nil, false
		}
		keyEnd := int(dec.InputOffset())
		keyStart := prev
		for keyStart < keyEnd && data[keyStart] != '"' {
			keyStart++ // skip whitespace and the separating comma
		}
		var value json.RawMessage
		if err := dec.Decode(&value); err != nil {
			return nil, false
		}
		members = append(members, member{key: key, rawKey: data[keyStart:keyEnd], value: value})
		prev = int(dec.InputOffset())
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return nil, false
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, false
	}
	return members, true
}

func joinObject(members []member) json.RawMessage {
	n := 2
	for _, m := range members {
		n += len(m.rawKey) + len(m.value) + 2
	}
	out := make([]byte, 0, n)
	out = append(out, '{')
	for i, m := range members {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, m.rawKey...)
		out = append(out, ':')
		out = append(out, m.value...)
	}
	return append(out, '}')
}

func quote(s string) []byte {
	b, _ := json.Marshal(s) // marshalling a string cannot fail
	return b
}
