package search

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

func FuzzTokenize(f *testing.F) {
	for _, s := range []string{
		"getWeatherForecast", "github__create_issue", "HTTPServer", "s3Bucket", "Größe_berechnen",
		"天気予報を取得", "ǅemal ǈubljana", "İstanbul", "e.g. 3.14", "a\xffb\xc3", "__--..//::", "x" + strings.Repeat("_y", 100),
		"Read the complete contents of a file from the file system.", "ΣΊΣΥΦΟΣ", "क्षत्रिय", "ABCdef123GHI",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, tok := range tokenize(s) {
			if tok == "" {
				t.Fatalf("tokenize(%q) produced an empty token", s)
			}
			if !utf8.ValidString(tok) {
				t.Fatalf("tokenize(%q) produced invalid UTF-8 %q", s, tok)
			}
			if strings.ToLower(tok) != tok {
				t.Fatalf("tokenize(%q) produced %q, not lower-case", s, tok)
			}
		}
	})
}

func FuzzDocFromTool(f *testing.F) {
	for _, rt := range realTools[:10] {
		f.Add(rt.key, []byte(rt.tool))
	}
	for _, s := range []string{``, `null`, `[]`, `{"name":1}`, `{"inputSchema":{"properties":{"a":{"properties":{"b":{"items":1}}}}}}`, `{"name":"a","name":"b"}`, `{"name":"x\u0000\ud800"}`, `{"inputSchema":{"properties":{"a":{"items":{"properties":{"b":{"title":"B"}}}}}}}`, `{"name":"n",`} {
		f.Add("key", []byte(s))
	}
	f.Fuzz(func(t *testing.T, key string, tool []byte) {
		d := DocFromTool(key, tool)
		if d.Key != key {
			t.Fatalf("Key = %q, want %q", d.Key, key)
		}
		if !strings.Contains(d.Name, key) {
			t.Fatalf("Name %q does not contain key %q", d.Name, key)
		}
		ix := Build([]Doc{d, {Key: "other", Name: "unrelated"}})
		// A document is found by its own name whenever the name has any terms.
		if len(tokenize(d.Name)) > 0 {
			hits := ix.Search(d.Name, 2)
			found := false
			for _, h := range hits {
				found = found || h.Key == key
			}
			if !found {
				t.Fatalf("Search(%q) = %v, missing %q", d.Name, hits, key)
			}
		}
		if json.Valid(tool) {
			_ = ix.Search(d.Description, 3)
		}
	})
}
