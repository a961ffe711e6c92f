//go:build wasip1

// Command gohostile is a test fixture: a policy module written with the Go
// SDK that misbehaves on demand. The tool name of a tool_call selects the
// misbehaviour; any other tool is allowed, so tests can check that an
// instance replaced after a failure works again.
package main

import (
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/edge-mcp/edge-mcp/guest"
	"github.com/edge-mcp/edge-mcp/guest/jsonlite"
)

var (
	keep      [][]byte
	calls     int
	lastEvent string
	keepOne   []byte
)

func init() {
	guest.OnConfigure(func(cfg []byte) error {
		if strings.Contains(string(cfg), `"reject":true`) {
			return errString("configuration rejected on purpose")
		}
		return nil
	})
	guest.OnToolCall(func(c *guest.ToolCall) guest.Decision {
		calls++
		switch c.Tool {
		case "loop":
			for {
			}
		case "bomb":
			for {
				keep = append(keep, make([]byte, 1<<20))
			}
		case "panic":
			panic("hostile module panics on purpose")
		case "exit":
			os.Exit(3)
		case "chatty":
			for i := 0; i < 1000; i++ {
				println("chatty guest line", i)
			}
		case "count":
			return guest.Deny(itoa(calls))
		case "client":
			return guest.Deny(c.Client.ID + "|" + c.Client.Name + "|" + c.Server)
		case "echo":
			return guest.Rewrite(c.Arguments)
		case "parse":
			// Build a document tree (many small pointerful objects) per call.
			v, err := jsonlite.Parse(c.Arguments)
			if err != nil {
				return guest.Deny(err.Error())
			}
			return guest.Rewrite(v.AppendJSON(nil))
		case "garbage":
			// Allocate and drop a copy of the arguments: a handler that
			// makes garbage on every call.
			keepOne = append([]byte(nil), c.Arguments...)
			return guest.Rewrite(keepOne)
		case "year":
			return guest.Deny(strconv.Itoa(time.Now().Year()))
		case "lastevent":
			return guest.Deny(lastEvent)
		}
		return guest.Allow()
	})
	guest.OnEvent(func(e *guest.Event) {
		lastEvent = e.Kind + "|" + e.Server + "|" + e.Tool + "|" + e.Client.ID + "|" +
			strconv.FormatBool(e.IsError) + "|" + e.Error + "|" + strconv.FormatBool(e.DurationMS >= 1) + "|" + strconv.FormatBool(e.TimeMS > 0)
	})
	guest.OnToolResult(func(r *guest.ToolResult) error {
		if r.Tool == "fail" {
			return errString("tool_result refused on purpose")
		}
		if r.Tool == "badshape" {
			r.Set([]byte(`{"content":"not an array"}`))
		}
		return nil
	})
}

type errString string

func (e errString) Error() string { return string(e) }

func itoa(n int) string { return strconv.Itoa(n) }

func main() {}
