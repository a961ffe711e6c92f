package jsontext_test

import (
	"fmt"

	"github.com/edge-mcp/edge-mcp/guest/jsontext"
)

func Example() {
	doc := []byte(`{"tool":"search","args":{"q":"caf\u00e9","limit":10}}`)
	if !jsontext.Valid(doc) {
		return
	}
	_, err := jsontext.Members(doc, 0, func(m jsontext.Member) bool {
		if m.KeyIs(doc, "tool") {
			tool, _ := jsontext.Unquote(m.Value(doc))
			fmt.Println("tool:", tool)
		}
		if m.KeyIs(doc, "args") {
			args := m.Value(doc)
			_, _ = jsontext.Members(args, 0, func(a jsontext.Member) bool {
				fmt.Printf("arg %s = %s\n", a.Key(args), a.Value(args))
				return true
			})
		}
		return true
	})
	fmt.Println("error:", err)

	out := jsontext.AppendString([]byte(`{"note":`), "tab\there, \"quoted\", bad \xff byte")
	fmt.Println(string(append(out, '}')))
	// Output:
	// tool: search
	// arg q = "caf\u00e9"
	// arg limit = 10
	// error: <nil>
	// {"note":"tab\there, \"quoted\", bad \ufffd byte"}
}
