package listing

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
)

func rawOf(s string) json.RawMessage { return json.RawMessage(s) }

// TestPages: every page holds pageSize items and the cursor of the next;
// following the cursors gives every item once, and a cursor that is not a
// page boundary (the list changed in between) gets the rest of the list.
func TestPages(t *testing.T) {
	var items []string
	for i := range 5 {
		items = append(items, fmt.Sprintf(`{"name":"t%d"}`, i))
	}
	for _, c := range []struct {
		name     string
		pageSize int
		pages    int
	}{{"one page", 0, 1}, {"pages of two", 2, 3}, {"pages of five", 5, 1}, {"pages of nine", 9, 1}} {
		t.Run(c.name, func(t *testing.T) {
			pages := Pages("tools", items, rawOf, c.pageSize)
			if len(pages) != c.pages {
				t.Fatalf("%d pages, want %d", len(pages), c.pages)
			}
			var seen []string
			cursor := ""
			for range 10 {
				res, err := Page(pages, "tools", items, rawOf, cursor, c.pageSize)
				if err != nil {
					t.Fatal(err)
				}
				var p struct {
					Tools      []struct{ Name string }
					NextCursor string
				}
				if err := json.Unmarshal(res, &p); err != nil {
					t.Fatalf("%s: %v", res, err)
				}
				for _, x := range p.Tools {
					seen = append(seen, x.Name)
				}
				if cursor = p.NextCursor; cursor == "" {
					break
				}
			}
			if want := []string{"t0", "t1", "t2", "t3", "t4"}; !slices.Equal(seen, want) {
				t.Errorf("paged through %v, want %v", seen, want)
			}
		})
	}
	pages := Pages("tools", items, rawOf, 2)
	if res, err := Page(pages, "tools", items, rawOf, EncodeCursor(3), 2); err != nil || string(res) != `{"tools":[{"name":"t3"},{"name":"t4"}]}` {
		t.Errorf("off-boundary cursor: %s %v", res, err)
	}
	if res, err := Page(pages, "tools", items, rawOf, EncodeCursor(40), 2); err != nil || string(res) != `{"tools":[]}` {
		t.Errorf("cursor past the end: %s %v", res, err)
	}
	if !Same(pages, Pages("tools", items, rawOf, 2)) || Same(pages, Pages("tools", items[1:], rawOf, 2)) {
		t.Error("Same does not compare the encodings")
	}
}

// TestParse: a list result's items and next cursor, or a clear error.
func TestParse(t *testing.T) {
	for _, c := range []struct{ name, result, err string }{
		{"items and cursor", `{"tools":[{"name":"a"}],"nextCursor":"x"}`, ""},
		{"null member", `{"tools":null}`, ""},
		{"not an object", `[]`, "decoding tools/list result"},
		{"member not an array", `{"tools":{}}`, `decoding tools/list result member "tools"`},
		{"cursor not a string", `{"tools":[],"nextCursor":1}`, "decoding tools/list nextCursor"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := Parse(json.RawMessage(c.result), "tools/list", "tools")
			if (err == nil) != (c.err == "") || err != nil && !strings.Contains(err.Error(), c.err) {
				t.Fatalf("err %v, want %q", err, c.err)
			}
		})
	}
}

func contains(s, sub string) bool {
	return len(sub) == 0 || len(s) >= len(sub) && (s[:len(sub)] == sub || contains(s[1:], sub))
}

// FuzzCursor: any cursor decodes to an offset it encodes back to, or to
// an error; a page for it is JSON.
func FuzzCursor(f *testing.F) {
	f.Add(EncodeCursor(0))
	f.Add(EncodeCursor(10))
	f.Add("bzotMQ") // "o:-1"
	f.Add("bzo5OTk5OTk5OTk5OTk5OTk5OTk5OTk5OQ")
	items := []string{`{}`, `{}`, `{}`}
	pages := Pages("tools", items, rawOf, 2)
	f.Fuzz(func(t *testing.T, cursor string) {
		if n, err := DecodeCursor(cursor); err == nil && n < 0 {
			t.Fatalf("%q decoded to %d", cursor, n)
		}
		if res, err := Page(pages, "tools", items, rawOf, cursor, 2); err == nil && !json.Valid(res) {
			t.Fatalf("page for %q is not JSON: %s", cursor, res)
		}
	})
}
