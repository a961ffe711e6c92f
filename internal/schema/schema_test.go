package schema

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
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

func TestValidate(t *testing.T) {
	tests := []struct {
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
	}
	v := NewValidator(16)
	for _, tt := range tests {
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
	}
	v := NewValidator(8)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			schema := fmt.Sprintf(`{"type":"object","properties":{"x":{"$ref":%q}}}`, tt.ref)
			if tt.ref == "" {
				schema = fmt.Sprintf(`{"$schema":%q,"type":"object"}`, srv.URL+"/meta.json")
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
	v := NewValidator(64)
	f.Fuzz(func(t *testing.T, schema, args []byte) {
		err := v.Validate(schema, args)
		var verr *ValidationError
		if errors.As(err, &verr) {
			if len(verr.All) == 0 || verr.Message == "" {
				t.Fatalf("empty ValidationError: %#v", verr)
			}
			_ = verr.Error()
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
