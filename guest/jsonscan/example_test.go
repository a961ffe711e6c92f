package jsonscan_test

import (
	"fmt"

	"github.com/edge-mcp/edge-mcp/guest/jsonscan"
)

func Example() {
	doc := []byte(`{"tool":"search","args":{"q":"caf\u00e9","limit":10}}`)
	if !jsonscan.Valid(doc) {
		return
	}
	_, err := jsonscan.Members(doc, 0, func(m jsonscan.Member) bool {
		if m.KeyIs(doc, "tool") {
			tool, _ := jsonscan.Unquote(m.Value(doc))
			fmt.Println("tool:", tool)
		}
		if m.KeyIs(doc, "args") {
			args := m.Value(doc)
			_, _ = jsonscan.Members(args, 0, func(a jsonscan.Member) bool {
				fmt.Printf("arg %s = %s\n", a.Key(args), a.Value(args))
				return true
			})
		}
		return true
	})
	fmt.Println("error:", err)

	out := jsonscan.AppendString([]byte(`{"note":`), "tab\there, \"quoted\", bad \xff byte")
	fmt.Println(string(append(out, '}')))
	// Output:
	// tool: search
	// arg q = "caf\u00e9"
	// arg limit = 10
	// error: <nil>
	// {"note":"tab\there, \"quoted\", bad \ufffd byte"}
}
