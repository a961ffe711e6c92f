package schema

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
)

const draft07Schema = `{
  "$schema": "http://json-schema.org/draft-07/schema#",
  "type": "object",
  "definitions": {
    "address": {
      "type": "object",
      "properties": {
        "city": {"type": "string"},
        "zip":  {"type": "integer", "minimum": 1000, "maximum": 99999}
      },
      "required": ["city"],
      "additionalProperties": false
    }
  },
  "properties": {
    "location": {"$ref": "#/definitions/address"},
    "units":    {"enum": ["metric", "imperial"]}
  },
  "required": ["location"]
}`

const draft2020Schema = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "$defs": {
    "item": {
      "type": "object",
      "properties": {
        "sku": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{4}$"},
        "qty": {"type": "integer", "minimum": 1, "maximum": 10}
      },
      "required": ["sku", "qty"]
    }
  },
  "properties": {
    "items": {"type": "array", "items": {"$ref": "#/$defs/item"}, "minItems": 1, "maxItems": 3},
    "note":  {"type": "string", "maxLength": 5}
  },
  "required": ["items"],
  "additionalProperties": false
}`

// noDialectSchema has no "$schema": it must be read as 2020-12, where
// "prefixItems" exists and the array form of "items" does not.
const noDialectSchema = `{
  "type": "object",
  "properties": {
    "pair": {"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}], "items": false}
  }
}`

// validateCases is the table of TestValidate and TestLibraryAgrees.
var validateCases = []struct {
	name    string
	schema  string
	args    string
	path    string // expected Path; ignored when valid
	message string // expected Message; ignored when valid
	valid   bool
}{
	{name: "draft07 valid", schema: draft07Schema, args: `{"location":{"city":"Oslo","zip":1234},"units":"metric"}`, valid: true},
	{name: "draft07 missing root property", schema: draft07Schema, args: `{}`, path: "", message: `missing property "location"`},
	{name: "draft07 nil args are {}", schema: draft07Schema, args: ``, path: "", message: `missing property "location"`},
	{name: "draft07 null args are {}", schema: draft07Schema, args: `null`, path: "", message: `missing property "location"`},
	{name: "draft07 missing nested via ref", schema: draft07Schema, args: `{"location":{"zip":1234}}`, path: "/location", message: `missing property "city"`},
	{name: "draft07 nested type mismatch", schema: draft07Schema, args: `{"location":{"city":"Oslo","zip":"1234"}}`, path: "/location/zip", message: "got string, want integer"},
	{name: "draft07 minimum", schema: draft07Schema, args: `{"location":{"city":"Oslo","zip":12}}`, path: "/location/zip", message: "minimum: got 12, want 1000"},
	{name: "draft07 maximum", schema: draft07Schema, args: `{"location":{"city":"Oslo","zip":123456}}`, path: "/location/zip", message: "maximum: got 123456, want 99999"},
	{name: "draft07 additionalProperties false", schema: draft07Schema, args: `{"location":{"city":"Oslo","street":"x"}}`, path: "/location", message: `additional property "street" not allowed`},
	{name: "draft07 enum", schema: draft07Schema, args: `{"location":{"city":"Oslo"},"units":"kelvin"}`, path: "/units", message: `value must be one of "metric", "imperial"`},
	{name: "draft07 root not object", schema: draft07Schema, args: `[1,2]`, path: "", message: "got array, want object"},
	{name: "2020 valid", schema: draft2020Schema, args: `{"items":[{"sku":"ABC-1234","qty":2},{"sku":"XYZ-0001","qty":10}],"note":"hi"}`, valid: true},
	{name: "2020 array of objects missing", schema: draft2020Schema, args: `{"items":[{"sku":"ABC-1234","qty":2},{"sku":"XYZ-0001"}]}`, path: "/items/1", message: `missing property "qty"`},
	{name: "2020 pattern", schema: draft2020Schema, args: `{"items":[{"sku":"abc","qty":2}]}`, path: "/items/0/sku", message: `"abc" does not match pattern "^[A-Z]{3}-[0-9]{4}$"`},
	{name: "2020 nested type", schema: draft2020Schema, args: `{"items":[{"sku":"ABC-1234","qty":1.5}]}`, path: "/items/0/qty", message: "got number, want integer"},
	{name: "2020 minItems", schema: draft2020Schema, args: `{"items":[]}`, path: "/items", message: "minItems: got 0, want 1"},
	{name: "2020 maxLength", schema: draft2020Schema, args: `{"items":[{"sku":"ABC-1234","qty":1}],"note":"too long"}`, path: "/note", message: "maxLength: got 8, want 5"},
	{name: "2020 additional root", schema: draft2020Schema, args: `{"items":[{"sku":"ABC-1234","qty":1}],"b":1,"a":2}`, path: "", message: `additional properties "a", "b" not allowed`},
	{name: "default dialect is 2020-12 valid", schema: noDialectSchema, args: `{"pair":["a",1]}`, valid: true},
	{name: "default dialect is 2020-12 prefixItems", schema: noDialectSchema, args: `{"pair":[1,"a"]}`, path: "/pair/0", message: "got number, want string"},
	{name: "default dialect is 2020-12 items false", schema: noDialectSchema, args: `{"pair":["a",1,2]}`, path: "/pair/2", message: "value not allowed"},
	{name: "pointer escaping", schema: `{"properties":{"a/b~c":{"type":"string"}}}`, args: `{"a/b~c":1}`, path: "/a~1b~0c", message: "got number, want string"},
	{name: "anyOf reported once", schema: `{"anyOf":[{"type":"string"},{"type":"integer"}]}`, args: `true`, path: "", message: "value does not match any of the allowed schemas (anyOf)"},
	{name: "args not JSON", schema: draft07Schema, args: `{"location":`, path: "", message: "arguments are not valid JSON"},
	{name: "empty schema accepts anything", schema: ``, args: `{"x":1}`, valid: true},
	{name: "draft07 $ref siblings ignored", schema: `{"$schema":"http://json-schema.org/draft-07/schema#","definitions":{"s":{"type":"string"}},"properties":{"a":{"$ref":"#/definitions/s","maxLength":1}}}`, args: `{"a":"long"}`, valid: true},
	{name: "2020 $ref siblings apply", schema: `{"$defs":{"s":{"type":"string"}},"properties":{"a":{"$ref":"#/$defs/s","maxLength":1}}}`, args: `{"a":"long"}`, path: "/a", message: "maxLength: got 4, want 1"},
	{name: "ref relative to $id", schema: `{"$id":"https://example.com/root.json","$defs":{"s":{"$id":"str.json","type":"string"}},"properties":{"a":{"$ref":"str.json"}}}`, args: `{"a":1}`, path: "/a", message: "got number, want string"},
	{name: "ref to anchor", schema: `{"$defs":{"s":{"$anchor":"str","type":"string"}},"properties":{"a":{"$ref":"#str"}}}`, args: `{"a":true}`, path: "/a", message: "got boolean, want string"},
	{name: "recursive ref descends", schema: `{"type":"object","properties":{"name":{"type":"string"},"child":{"$ref":"#"}}}`, args: `{"child":{"child":{"name":7}}}`, path: "/child/child/name", message: "got number, want string"},
	{name: "draft07 dependencies", schema: `{"$schema":"http://json-schema.org/draft-07/schema#","dependencies":{"card":["billing"],"vip":{"required":["level"]}}}`, args: `{"card":1,"vip":true}`, path: "", message: `missing property "billing" (required when "card" is present)`},
	{name: "2020 dependentRequired", schema: `{"dependentRequired":{"card":["billing","cvc"]}}`, args: `{"card":1}`, path: "", message: `missing properties "billing", "cvc" (required when "card" is present)`},
	{name: "if then", schema: `{"if":{"properties":{"kind":{"const":"zip"}}},"then":{"properties":{"code":{"type":"integer"}}},"else":{"properties":{"code":{"type":"string"}}}}`, args: `{"kind":"zip","code":"x"}`, path: "/code", message: "got string, want integer"},
	{name: "if else", schema: `{"if":{"properties":{"kind":{"const":"zip"}}},"then":{"properties":{"code":{"type":"integer"}}},"else":{"properties":{"code":{"type":"string"}}}}`, args: `{"kind":"city","code":1}`, path: "/code", message: "got number, want string"},
	{name: "oneOf both match", schema: `{"oneOf":[{"type":"integer"},{"minimum":0}]}`, args: `5`, path: "", message: "value matches more than one of the allowed schemas (oneOf)"},
	{name: "oneOf one matches", schema: `{"oneOf":[{"type":"integer"},{"type":"string"}]}`, args: `"x"`, valid: true},
	{name: "not", schema: `{"properties":{"a":{"not":{"type":"null"}}}}`, args: `{"a":null}`, path: "/a", message: "value must not match the schema (not)"},
	{name: "const", schema: `{"properties":{"v":{"const":2}}}`, args: `{"v":3}`, path: "/v", message: "value must be 2"},
	{name: "exclusiveMinimum", schema: `{"properties":{"n":{"exclusiveMinimum":0}}}`, args: `{"n":0}`, path: "/n", message: "exclusiveMinimum: got 0, want 0"},
	{name: "multipleOf", schema: `{"properties":{"n":{"multipleOf":5}}}`, args: `{"n":12}`, path: "/n", message: "multipleOf: got 12, want 5"},
	{name: "1.0 is an integer", schema: `{"properties":{"n":{"type":"integer"}}}`, args: `{"n":1.0}`, valid: true},
	{name: "type list", schema: `{"properties":{"a":{"type":["integer","null"]}}}`, args: `{"a":"x"}`, path: "/a", message: "got string, want integer or null"},
	{name: "patternProperties and additionalProperties", schema: `{"patternProperties":{"^x-":{"type":"string"}},"additionalProperties":false}`, args: `{"x-a":1,"y":2}`, path: "", message: `additional property "y" not allowed`},
	{name: "uniqueItems", schema: `{"properties":{"t":{"uniqueItems":true}}}`, args: `{"t":[1,2,1.0]}`, path: "/t", message: "items at index 0 and 2 are equal"},
	{name: "2020 minContains", schema: `{"properties":{"t":{"contains":{"type":"string"},"minContains":2}}}`, args: `{"t":["a",1]}`, path: "/t", message: "minContains: got 1, want 2"},
	{name: "draft07 contains", schema: `{"$schema":"http://json-schema.org/draft-07/schema#","properties":{"t":{"contains":{"type":"string"}}}}`, args: `{"t":[1]}`, path: "/t", message: "no item matches the contains schema"},
	{name: "draft07 items array and additionalItems", schema: `{"$schema":"http://json-schema.org/draft-07/schema#","properties":{"p":{"items":[{"type":"string"}],"additionalItems":false}}}`, args: `{"p":["a",1]}`, path: "/p/1", message: "value not allowed"},
	{name: "draft07 without fragment", schema: `{"$schema":"http://json-schema.org/draft-07/schema","items":[{"type":"string"}]}`, args: `[1]`, path: "/0", message: "got number, want string"},
	{name: "2020 with empty fragment", schema: `{"$schema":"https://json-schema.org/draft/2020-12/schema#","prefixItems":[{"type":"string"}]}`, args: `[1]`, path: "/0", message: "got number, want string"},
	{name: "propertyNames", schema: `{"propertyNames":{"pattern":"^[a-z]+$"}}`, args: `{"ok":1,"Bad":2}`, path: "", message: `invalid property name "Bad"`},
	{name: "unevaluatedProperties", schema: `{"properties":{"a":{}},"allOf":[{"properties":{"b":{}}}],"unevaluatedProperties":false}`, args: `{"a":1,"b":2,"c":3}`, path: "", message: `unevaluated property "c" not allowed`},
	{name: "unevaluatedProperties valid", schema: `{"properties":{"a":{}},"allOf":[{"properties":{"b":{}}}],"unevaluatedProperties":false}`, args: `{"a":1,"b":2}`, valid: true},
	{name: "unevaluatedItems", schema: `{"prefixItems":[{"type":"string"}],"unevaluatedItems":false}`, args: `["a",1]`, path: "/1", message: "value not allowed"},
	{name: "minProperties", schema: `{"minProperties":1}`, args: `{}`, path: "", message: "minProperties: got 0, want 1"},
	{name: "maxLength counts code points", schema: `{"properties":{"s":{"maxLength":2}}}`, args: `{"s":"æø"}`, valid: true},
	{name: "false schema", schema: `false`, args: `{}`, path: "", message: "value not allowed"},
	{name: "true schema", schema: `true`, args: `[1]`, valid: true},
}

func TestValidate(t *testing.T) {
	v := NewValidator(16)
	for _, tt := range validateCases {
		t.Run(tt.name, func(t *testing.T) {
			err := v.Validate(json.RawMessage(tt.schema), json.RawMessage(tt.args))
			if tt.valid {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			var verr *ValidationError
			if !errors.As(err, &verr) {
				t.Fatalf("Validate() = %v (%T), want *ValidationError", err, err)
			}
			if verr.Path != tt.path || verr.Message != tt.message {
				t.Errorf("got Path %q Message %q, want %q %q", verr.Path, verr.Message, tt.path, tt.message)
			}
			if len(verr.All) == 0 || verr.All[0].Path != verr.Path || verr.All[0].Message != verr.Message {
				t.Errorf("All[0] = %+v does not match Path/Message", verr.All)
			}
			if !strings.HasPrefix(err.Error(), "arguments"+tt.path+": "+tt.message) {
				t.Errorf("Error() = %q", err.Error())
			}
		})
	}
}

// TestLibraryAgrees is the differential check: for every case of the table,
// jsonschema-go's own verdict and the package's walk both match the
// expectation, so neither accepts what the other rejects.
func TestLibraryAgrees(t *testing.T) {
	v := NewValidator(0)
	for _, tt := range validateCases {
		if tt.schema == "" || !json.Valid([]byte(tt.args)) && tt.args != "" {
			continue // not handed to either
		}
		t.Run(tt.name, func(t *testing.T) {
			c, err := v.compiled([]byte(tt.schema))
			if err != nil {
				t.Fatal(err)
			}
			inst, err := decodeArgs([]byte(tt.args))
			if err != nil {
				t.Fatal(err)
			}
			if lerr := c.rs.Validate(inst); (lerr == nil) != tt.valid {
				t.Errorf("jsonschema-go: %v, want valid=%v", lerr, tt.valid)
			}
			w := walker{c: c}
			if ok := w.eval(inst, c.root, nil); ok != tt.valid || w.unsure {
				t.Errorf("walk: valid=%v unsure=%v %v, want valid=%v", ok, w.unsure, w.errs, tt.valid)
			}
		})
	}
}

// TestLibraryFalseRejectionsOverridden covers arguments that are valid
// although jsonschema-go v0.4.3 rejects them: it divides floats for
// "multipleOf" and applies "unevaluatedProperties" to draft-07 schemas,
// where it is not a keyword (as did the previous validator, neither
// rejected them).
func TestLibraryFalseRejectionsOverridden(t *testing.T) {
	tests := []struct{ name, schema, args string }{
		{"multipleOf 0.01", `{"properties":{"price":{"multipleOf":0.01}}}`, `{"price":0.07}`},
		{"multipleOf 0.1", `{"multipleOf":0.1}`, `0.3`},
		{"draft07 has no unevaluatedProperties", `{"$schema":"http://json-schema.org/draft-07/schema#","unevaluatedProperties":false}`, `{"c":1}`},
	}
	v := NewValidator(0)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := v.Validate(json.RawMessage(tt.schema), json.RawMessage(tt.args)); err != nil {
				t.Errorf("Validate() = %v, want nil", err)
			}
			c, _ := v.compiled([]byte(tt.schema))
			inst, _ := decodeArgs([]byte(tt.args))
			t.Logf("jsonschema-go alone: %v", c.rs.Validate(inst))
		})
	}
	// The exact check still rejects what is not a multiple.
	err := v.Validate(json.RawMessage(`{"properties":{"price":{"multipleOf":0.01}}}`), json.RawMessage(`{"price":0.075}`))
	if verr, ok := errors.AsType[*ValidationError](err); !ok || verr.Path != "/price" || verr.Message != "multipleOf: got 0.075, want 0.01" {
		t.Errorf("Validate(0.075) = %v", err)
	}
}

// TestDynamicRefFallsBackToLibraryMessage: "$dynamicRef" is left to the
// library, whose message is reported at the arguments' root.
func TestDynamicRefFallsBackToLibraryMessage(t *testing.T) {
	v := NewValidator(0)
	schema := json.RawMessage(`{"$defs":{"s":{"$dynamicAnchor":"s","type":"string"}},"properties":{"a":{"$dynamicRef":"#s"}}}`)
	if err := v.Validate(schema, json.RawMessage(`{"a":"x"}`)); err != nil {
		t.Fatalf("valid arguments: %v", err)
	}
	err := v.Validate(schema, json.RawMessage(`{"a":1}`))
	verr, ok := errors.AsType[*ValidationError](err)
	if !ok || verr.Path != "" || !strings.Contains(verr.Message, "string") || strings.Contains(verr.Message, "validating") {
		t.Errorf("Validate() = %#v", err)
	}
}

// TestNumberOutOfRange: a number beyond float64 cannot be checked faithfully
// and lets the call through.
func TestNumberOutOfRange(t *testing.T) {
	v := NewValidator(0)
	if err := v.Validate(json.RawMessage(`{"properties":{"n":{"type":"integer","maximum":10}}}`), json.RawMessage(`{"n":1e400}`)); err != nil {
		t.Errorf("Validate() = %v, want nil", err)
	}
}

// TestChildrenCoverEverySubschemaField guards against a jsonschema-go
// upgrade adding a subschema keyword that the reference index would miss.
func TestChildrenCoverEverySubschemaField(t *testing.T) {
	var s jsonschema.Schema
	rv := reflect.ValueOf(&s).Elem()
	want := 0
	for i := range rv.NumField() {
		f := rv.Field(i)
		switch f.Type() {
		case reflect.TypeFor[*jsonschema.Schema]():
			f.Set(reflect.ValueOf(&jsonschema.Schema{}))
		case reflect.TypeFor[[]*jsonschema.Schema]():
			f.Set(reflect.ValueOf([]*jsonschema.Schema{{}}))
		case reflect.TypeFor[map[string]*jsonschema.Schema]():
			f.Set(reflect.ValueOf(map[string]*jsonschema.Schema{"k": {}}))
		default:
			continue
		}
		want++
	}
	got := 0
	children(&s, func(*jsonschema.Schema) { got++ })
	if want < 20 || got != want {
		t.Errorf("children visited %d subschemas, the Schema type has %d", got, want)
	}
}

func TestValidationErrorAllSortedAndCounted(t *testing.T) {
	v := NewValidator(0)
	err := v.Validate(json.RawMessage(draft2020Schema),
		json.RawMessage(`{"items":[{"sku":"bad","qty":0},{"qty":"x"}],"note":"far too long"}`))
	var verr *ValidationError
	if !errors.As(err, &verr) {
		t.Fatalf("Validate() = %v, want *ValidationError", err)
	}
	want := []Detail{
		{Path: "/items/0/qty", Message: "minimum: got 0, want 1"},
		{Path: "/items/0/sku", Message: `"bad" does not match pattern "^[A-Z]{3}-[0-9]{4}$"`},
		{Path: "/items/1", Message: `missing property "sku"`},
		{Path: "/items/1/qty", Message: "got string, want integer"},
		{Path: "/note", Message: "maxLength: got 12, want 5"},
	}
	if fmt.Sprint(verr.All) != fmt.Sprint(want) {
		t.Errorf("All =\n%v\nwant\n%v", verr.All, want)
	}
	if got, wantMsg := err.Error(), "arguments/items/0/qty: minimum: got 0, want 1 (and 4 more errors)"; got != wantMsg {
		t.Errorf("Error() = %q, want %q", got, wantMsg)
	}
}

func TestErrorFormatRoot(t *testing.T) {
	e := &ValidationError{Path: "", Message: `missing property "city"`, All: []Detail{{}}}
	if got := e.Error(); got != `arguments: missing property "city"` {
		t.Errorf("Error() = %q", got)
	}
	e = &ValidationError{Path: "/location/zip", Message: "got string, want integer", All: []Detail{{}, {}}}
	if got := e.Error(); got != "arguments/location/zip: got string, want integer (and 1 more error)" {
		t.Errorf("Error() = %q", got)
	}
}

func TestBadSchema(t *testing.T) {
	tests := []struct {
		name   string
		schema string
	}{
		{"not json", `{"type":`},
		{"wrong type keyword", `{"type": 12}`},
		{"unknown dialect", `{"$schema": "https://example.invalid/my-dialect", "type": "object"}`},
		{"bad regexp", `{"type":"string","pattern":"(?=lookahead)"}`},
		{"dangling local ref", `{"$ref": "#/$defs/missing"}`},
		{"ref to absent keyword", `{"$ref": "#/not"}`},
		{"null", `null`},
		{"null subschema", `{"properties":{"a":null}}`},
		{"null items", `{"items":null}`},
		{"null dependency", `{"$schema":"http://json-schema.org/draft-07/schema#","dependencies":{"a":null}}`},
		{"unknown type", `{"type":"strin"}`},
		{"empty type list", `{"type":[]}`},
		{"negative maxLength", `{"properties":{"a":{"maxLength":-1}}}`},
		{"zero multipleOf", `{"multipleOf":0}`},
		{"empty anyOf", `{"anyOf":[]}`},
		{"draft-04", `{"$schema":"http://json-schema.org/draft-04/schema#"}`},
		{"2019-09", `{"$schema":"https://json-schema.org/draft/2019-09/schema"}`},
		// Cycles that never descend into the arguments: the library would
		// recurse until the stack overflows and the process dies.
		{"self ref", `{"$ref":"#"}`},
		{"ref cycle through allOf", `{"$defs":{"a":{"allOf":[{"$ref":"#/$defs/b"}]},"b":{"not":{"$ref":"#/$defs/a"}}},"properties":{"x":{"$ref":"#/$defs/a"}}}`},
		{"dynamicRef cycle", `{"$dynamicAnchor":"x","anyOf":[{"$dynamicRef":"#x"}]}`},
	}
	v := NewValidator(8)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := v.Validate(json.RawMessage(tt.schema), json.RawMessage(`{}`))
			if !errors.Is(err, ErrBadSchema) {
				t.Fatalf("Validate() = %v, want ErrBadSchema", err)
			}
			var verr *ValidationError
			if errors.As(err, &verr) {
				t.Errorf("bad schema reported as ValidationError: %v", err)
			}
		})
	}
}

// TestRemoteRefRefused serves a real schema over HTTP and from a real file
// and checks that neither is ever read.
func TestRemoteRefRefused(t *testing.T) {
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		w.Header().Set("Content-Type", "application/schema+json")
		fmt.Fprint(w, `{"type":"string"}`)
	}))
	t.Cleanup(srv.Close)

	file := filepath.Join(t.TempDir(), "remote.json")
	if err := os.WriteFile(file, []byte(`{"type":"string"}`), 0o600); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name, ref string
	}{
		{"http", srv.URL + "/schema.json"},
		{"https", "https://127.0.0.1:1/schema.json"},
		{"file", "file://" + filepath.ToSlash(file)},
		{"relative", "other.json#/x"},
		{"dialect via http", ""},
		{"relative to an http $id", "-"},
	}
	v := NewValidator(8)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			schema := fmt.Sprintf(`{"type":"object","properties":{"x":{"$ref":%q}}}`, tt.ref)
			switch tt.ref {
			case "":
				schema = fmt.Sprintf(`{"$schema":%q,"type":"object"}`, srv.URL+"/meta.json")
			case "-":
				schema = fmt.Sprintf(`{"$id":%q,"properties":{"x":{"$ref":"schema.json"}}}`, srv.URL+"/root.json")
			}
			err := v.Validate(json.RawMessage(schema), json.RawMessage(`{"x":"s"}`))
			if !errors.Is(err, ErrBadSchema) {
				t.Fatalf("Validate() = %v, want ErrBadSchema", err)
			}
			if !strings.Contains(err.Error(), errRemoteRef.Error()) {
				t.Errorf("error %q does not explain the refusal", err)
			}
		})
	}
	if n := requests.Load(); n != 0 {
		t.Errorf("HTTP server got %d requests, want 0", n)
	}
}

func TestCacheCompilesOnce(t *testing.T) {
	v := NewValidator(4)
	for i := 0; i < 5; i++ {
		if err := v.Validate(json.RawMessage(draft07Schema), json.RawMessage(`{"location":{"city":"Oslo"}}`)); err != nil {
			t.Fatal(err)
		}
	}
	if hits, misses := v.Stats(); hits != 4 || misses != 1 {
		t.Fatalf("Stats() = %d hits, %d misses; want 4, 1", hits, misses)
	}
	// A broken schema is remembered too: the second call does not compile.
	bad := json.RawMessage(`{"type": 12}`)
	for i := 0; i < 2; i++ {
		if err := v.Validate(bad, nil); !errors.Is(err, ErrBadSchema) {
			t.Fatalf("Validate(bad) = %v", err)
		}
	}
	if hits, misses := v.Stats(); hits != 5 || misses != 2 {
		t.Fatalf("Stats() = %d hits, %d misses; want 5, 2", hits, misses)
	}
}

func TestCacheBoundedLRU(t *testing.T) {
	v := NewValidator(2)
	s := func(i int) json.RawMessage {
		return json.RawMessage(fmt.Sprintf(`{"type":"object","maxProperties":%d}`, i))
	}
	validate := func(i int) {
		t.Helper()
		if err := v.Validate(s(i), nil); err != nil {
			t.Fatal(err)
		}
	}
	validate(1) // miss
	validate(2) // miss
	validate(1) // hit; 2 is now least recently used
	validate(3) // miss; evicts 2
	validate(1) // hit
	validate(2) // miss again
	if hits, misses := v.Stats(); hits != 2 || misses != 4 {
		t.Fatalf("Stats() = %d hits, %d misses; want 2, 4", hits, misses)
	}
	v.mu.Lock()
	n := len(v.entries)
	v.mu.Unlock()
	if n != 2 {
		t.Errorf("cache holds %d entries, want 2", n)
	}
}

func TestConcurrentValidate(t *testing.T) {
	v := NewValidator(3)
	cases := []struct{ schema, args string }{
		{draft07Schema, `{"location":{"city":"Oslo"}}`},
		{draft2020Schema, `{"items":[{"sku":"ABC-1234","qty":1}]}`},
		{noDialectSchema, `{"pair":["a",1]}`},
		{`{"type":"object","required":["a"]}`, `{"a":1}`},
	}
	var wg sync.WaitGroup
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				c := cases[(g+i)%len(cases)]
				sch := c.schema
				if err := v.Validate(json.RawMessage(sch), json.RawMessage(c.args)); err != nil {
					t.Errorf("valid args rejected: %v", err)
					return
				}
				var verr *ValidationError
				if err := v.Validate(json.RawMessage(sch), json.RawMessage(`[]`)); !errors.As(err, &verr) || verr.Path != "" {
					t.Errorf("invalid args: got %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	hits, misses := v.Stats()
	if hits+misses != 16*50*2 {
		t.Errorf("hits+misses = %d, want %d", hits+misses, 16*50*2)
	}
}

func FuzzValidate(f *testing.F) {
	f.Add([]byte(draft07Schema), []byte(`{"location":{"city":"Oslo","zip":"x"}}`))
	f.Add([]byte(draft2020Schema), []byte(`{"items":[{"sku":"abc"}]}`))
	f.Add([]byte(noDialectSchema), []byte(`{"pair":[1]}`))
	f.Add([]byte(`{"$ref":"#"}`), []byte(`1`))
	f.Add([]byte(`{"$ref":"http://127.0.0.1:1/x"}`), []byte(`{}`))
	f.Add([]byte(`true`), []byte(``))
	f.Add([]byte(`{"anyOf":[{"not":{}}]}`), []byte(`null`))
	f.Add([]byte(`{"$defs":{"a":{"allOf":[{"$ref":"#/$defs/a"}]}},"$ref":"#/$defs/a"}`), []byte(`{}`))
	f.Add([]byte(`{"multipleOf":0.01,"minimum":0}`), []byte(`0.07`))
	f.Add([]byte(`{"unevaluatedProperties":false,"allOf":[{"properties":{"a":{}}}]}`), []byte(`{"a":1,"b":2}`))
	f.Add([]byte(`{"$dynamicAnchor":"n","properties":{"n":{"$dynamicRef":"#n"}},"type":"object"}`), []byte(`{"n":{"n":1}}`))
	v := NewValidator(64)
	f.Fuzz(func(t *testing.T, schema, args []byte) {
		err := v.Validate(schema, args)
		var verr *ValidationError
		if errors.As(err, &verr) {
			if len(verr.All) == 0 || verr.Message == "" {
				t.Fatalf("empty ValidationError: %#v", verr)
			}
			_ = verr.Error()
			// Arguments are only refused when jsonschema-go refuses them too.
			if c, cerr := v.compiled(schema); cerr == nil {
				if inst, derr := decodeArgs(args); derr == nil && c.rs.Validate(inst) == nil {
					t.Fatalf("refused %s although jsonschema-go accepts it: %v", args, err)
				}
			}
		}
		// Deterministic: the cached schema gives the same answer.
		err2 := v.Validate(schema, args)
		if (err == nil) != (err2 == nil) || (err != nil && err.Error() != err2.Error()) {
			t.Fatalf("second Validate = %v, first %v", err2, err)
		}
	})
}

// realisticSchema resembles a typical MCP tool inputSchema.
const realisticSchema = `{
  "type": "object",
  "properties": {
    "query": {"type": "string", "minLength": 1, "description": "Search query"},
    "limit": {"type": "integer", "minimum": 1, "maximum": 100, "default": 10},
    "filters": {
      "type": "object",
      "properties": {
        "language": {"type": "string", "enum": ["go", "rust", "python", "typescript"]},
        "since": {"type": "string", "format": "date"},
        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 10}
      },
      "additionalProperties": false
    }
  },
  "required": ["query"],
  "additionalProperties": false
}`

func BenchmarkValidateCached(b *testing.B) {
	v := NewValidator(0)
	schema := json.RawMessage(realisticSchema)
	args := json.RawMessage(`{"query":"rate limiter","limit":20,"filters":{"language":"go","since":"2024-01-01","tags":["net","http"]}}`)
	if err := v.Validate(schema, args); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if err := v.Validate(schema, args); err != nil {
			b.Fatal(err)
		}
	}
}
