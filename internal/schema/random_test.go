package schema

import (
	"encoding/json"
	"math/rand/v2"
	"testing"
)

// TestWalkAgreesWithLibraryOnRandomSchemas is a differential test: on
// random schemas built from the keywords of both dialects and random
// arguments, the package's walk and jsonschema-go reach the same verdict.
// Keywords on which the library knowingly differs (fractional multipleOf,
// 2020-12-only keywords in draft-07 schemas) are not generated.
func TestWalkAgreesWithLibraryOnRandomSchemas(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	v := NewValidator(0)
	n, compiledOK, invalid := 0, 0, 0
	for range 3000 {
		g := &gen{rng: rng, draft07: rng.IntN(3) == 0}
		sch := g.schema(3)
		if obj, ok := sch.(map[string]any); ok {
			obj["$defs"] = map[string]any{"d": g.schema(2)}
			if g.draft07 {
				obj["$schema"] = "http://json-schema.org/draft-07/schema#"
				obj["definitions"] = obj["$defs"]
				delete(obj, "$defs")
			}
		}
		raw, err := json.Marshal(sch)
		if err != nil {
			t.Fatal(err)
		}
		c, err := v.compiled(raw)
		if err != nil {
			continue // mostly "$ref" cycles, refused on purpose
		}
		compiledOK++
		for range 8 {
			n++
			inst := g.value(3)
			lib := c.rs.Validate(inst)
			w := walker{c: c}
			ok := w.eval(inst, c.root, nil)
			if w.unsure {
				continue
			}
			if ok != (lib == nil) {
				args, _ := json.Marshal(inst)
				t.Fatalf("schema %s\nargs %s\nwalk valid=%v %v\njsonschema-go: %v", raw, args, ok, w.errs, lib)
			}
			if !ok {
				invalid++
			}
		}
	}
	t.Logf("%d schemas compiled, %d of %d arguments invalid", compiledOK, invalid, n)
	if compiledOK < 1000 || invalid < n/10 || invalid > n*9/10 {
		t.Errorf("weak test: %d schemas compiled, %d of %d arguments invalid", compiledOK, invalid, n)
	}
}

// gen builds random schemas and values over a small vocabulary, so that
// they often interact.
type gen struct {
	rng     *rand.Rand
	draft07 bool
}

var (
	genNames    = []string{"a", "b", "c", "x-1"}
	genStrings  = []string{"", "a", "ab", "abc", "Z", "x-1"}
	genPatterns = []string{"^a", "b$", "^[a-z]*$", "-"}
	genTypes    = []string{"null", "boolean", "integer", "number", "string", "array", "object"}
)

func (g *gen) pick(l []string) string { return l[g.rng.IntN(len(l))] }

func (g *gen) value(depth int) any {
	k := g.rng.IntN(8)
	if depth == 0 && k >= 6 {
		k = g.rng.IntN(6)
	}
	switch k {
	case 0:
		return nil
	case 1:
		return g.rng.IntN(2) == 0
	case 2:
		return float64(g.rng.IntN(7) - 2)
	case 3:
		return float64(g.rng.IntN(7)) / 2
	case 4, 5:
		return g.pick(genStrings)
	case 6:
		a := make([]any, g.rng.IntN(4))
		for i := range a {
			a[i] = g.value(depth - 1)
		}
		return a
	default:
		m := map[string]any{}
		for range g.rng.IntN(4) {
			m[g.pick(genNames)] = g.value(depth - 1)
		}
		return m
	}
}

func (g *gen) schemas(depth int) []any {
	l := make([]any, 1+g.rng.IntN(3))
	for i := range l {
		l[i] = g.schema(depth)
	}
	return l
}

func (g *gen) schemaMap(depth int) map[string]any {
	m := map[string]any{}
	for range 1 + g.rng.IntN(2) {
		m[g.pick(genNames)] = g.schema(depth)
	}
	return m
}

func (g *gen) schema(depth int) any {
	if g.rng.IntN(8) == 0 {
		return g.rng.IntN(3) > 0
	}
	s := map[string]any{}
	keywords := 1 + g.rng.IntN(3)
	for range keywords {
		k := g.rng.IntN(30)
		if depth <= 0 && k >= 18 {
			k = g.rng.IntN(18)
		}
		switch k {
		case 0:
			s["type"] = g.pick(genTypes)
		case 1:
			s["type"] = []any{g.pick(genTypes[:3]), g.pick(genTypes[3:])}
		case 2:
			s["enum"] = []any{g.value(1), g.value(1), g.value(0)}
		case 3:
			s["const"] = g.value(1)
		case 4:
			s["minimum"] = float64(g.rng.IntN(4) - 1)
		case 5:
			s["exclusiveMaximum"] = float64(g.rng.IntN(4))
		case 6:
			s["multipleOf"] = float64(1 + g.rng.IntN(3))
		case 7:
			s["minLength"] = g.rng.IntN(3)
		case 8:
			s["maxLength"] = g.rng.IntN(3)
		case 9:
			s["pattern"] = g.pick(genPatterns)
		case 10:
			s["minItems"] = g.rng.IntN(3)
		case 11:
			s["maxItems"] = g.rng.IntN(3)
		case 12:
			s["uniqueItems"] = true
		case 13:
			s["required"] = []any{g.pick(genNames), g.pick(genNames[:2])}
		case 14:
			s["minProperties"] = g.rng.IntN(3)
		case 15:
			s["maxProperties"] = g.rng.IntN(3)
		case 16:
			if g.draft07 {
				s["$ref"] = "#/definitions/d"
			} else {
				s["$ref"] = "#/$defs/d"
			}
		case 17:
			if g.draft07 {
				s["dependencies"] = map[string]any{g.pick(genNames): []any{g.pick(genNames)}}
			} else {
				s["dependentRequired"] = map[string]any{g.pick(genNames): []any{g.pick(genNames)}}
			}
		case 18:
			s["properties"] = g.schemaMap(depth - 1)
		case 19:
			s["patternProperties"] = map[string]any{g.pick(genPatterns): g.schema(depth - 1)}
		case 20:
			s["additionalProperties"] = g.schema(depth - 1)
		case 21:
			s["propertyNames"] = g.schema(depth - 1)
		case 22:
			if g.draft07 && g.rng.IntN(2) == 0 {
				s["items"] = g.schemas(depth - 1)
				s["additionalItems"] = g.schema(depth - 1)
			} else if g.draft07 {
				s["items"] = g.schema(depth - 1)
			} else {
				s["prefixItems"] = g.schemas(depth - 1)
				s["items"] = g.schema(depth - 1)
			}
		case 23:
			s["contains"] = g.schema(depth - 1)
			if !g.draft07 && g.rng.IntN(2) == 0 {
				s["minContains"] = g.rng.IntN(3)
				s["maxContains"] = 1 + g.rng.IntN(2)
			}
		case 24:
			s["allOf"] = g.schemas(depth - 1)
		case 25:
			s["anyOf"] = g.schemas(depth - 1)
		case 26:
			s["oneOf"] = g.schemas(depth - 1)
		case 27:
			s["not"] = g.schema(depth - 1)
		case 28:
			s["if"], s["then"], s["else"] = g.schema(depth-1), g.schema(depth-1), g.schema(depth-1)
		default:
			switch {
			case g.draft07:
				s["dependencies"] = map[string]any{g.pick(genNames): g.schema(depth - 1)}
			case g.rng.IntN(3) == 0:
				s["dependentSchemas"] = map[string]any{g.pick(genNames): g.schema(depth - 1)}
			case g.rng.IntN(2) == 0:
				s["unevaluatedProperties"] = g.schema(depth - 1)
			default:
				s["unevaluatedItems"] = g.schema(depth - 1)
			}
		}
	}
	return s
}
