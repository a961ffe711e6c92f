package guesttest_test

import (
	"fmt"

	"github.com/edge-mcp/edge-mcp/guest"
	"github.com/edge-mcp/edge-mcp/guest/guesttest"
)

// A module registers its handlers in init; its tests call them natively.
func ExampleCall() {
	guest.OnToolCall(func(c *guest.ToolCall) guest.Decision {
		if guest.Glob("delete_*", c.Tool) {
			return guest.Deny("deleting is not allowed: " + c.Tool)
		}
		return guest.Allow()
	})
	defer guesttest.Reset()

	out, err := guesttest.Call("tool_call", `{"server":"github","tool":"delete_repo","arguments":{"repo":"x"}}`)
	if err != nil {
		panic(err)
	}
	fmt.Println(out.Action, "|", out.Reason)
	out, _ = guesttest.Call("tool_call", `{"server":"github","tool":"get_issue"}`)
	fmt.Println(out.Action, "|", string(out.Raw))
	// Output:
	// deny | deleting is not allowed: delete_repo
	// allow |
}
