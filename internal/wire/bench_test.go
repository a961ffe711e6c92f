package wire

import (
	"fmt"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// smallCall is a typical tools/call request (about 200 bytes).
const smallCall = `{"jsonrpc":"2.0","id":4242,"method":"tools/call","params":{"name":"github.search_issues","arguments":{"query":"repo:edge-mcp/edge-mcp is:open label:bug","limit":10},"_meta":{"progressToken":"c7f1-42-progress"}}}`

// bigResult returns a tools/call result of about 1 MiB: half a text block with
// escapes and non-ASCII text, half structured rows.
func bigResult() []byte {
	var text strings.Builder
	for text.Len() < 512<<10 {
		text.WriteString(`Line with \"quotes\", a tab\t, caf\u00e9 and 日本語 text; `)
	}
	var rows strings.Builder
	for i := 0; rows.Len() < 512<<10; i++ {
		if i > 0 {
			rows.WriteByte(',')
		}
		fmt.Fprintf(&rows, `{"id":%d,"name":"item-%d","score":%d.25,"tags":["a","b"],"active":true,"parent":null}`, i, i, i%100)
	}
	return []byte(`{"jsonrpc":"2.0","id":4242,"result":{"content":[{"type":"text","text":"` + text.String() +
		`"}],"structuredContent":{"rows":[` + rows.String() + `]},"isError":false}}`)
}

func benchDecode(b *testing.B, data []byte, decode func([]byte) (jsonrpc.Message, error)) {
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := decode(data); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecode(b *testing.B) {
	big := bigResult()
	for _, c := range []struct {
		name string
		data []byte
	}{{"small", []byte(smallCall)}, {"1MiB", big}} {
		b.Run(c.name+"/wire", func(b *testing.B) { benchDecode(b, c.data, Decode) })
		b.Run(c.name+"/gosdk", func(b *testing.B) { benchDecode(b, c.data, jsonrpc.DecodeMessage) })
	}
}

func BenchmarkEncode(b *testing.B) {
	big := bigResult()
	for _, c := range []struct {
		name string
		data []byte
	}{{"small", []byte(smallCall)}, {"1MiB", big}} {
		msg, err := Decode(c.data)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(c.name+"/wire", func(b *testing.B) {
			b.SetBytes(int64(len(c.data)))
			b.ReportAllocs()
			var buf []byte
			for b.Loop() {
				if buf, err = Append(buf[:0], msg); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(c.name+"/gosdk", func(b *testing.B) {
			b.SetBytes(int64(len(c.data)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := jsonrpc.EncodeMessage(msg); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkValid1MiB(b *testing.B) {
	big := bigResult()
	b.SetBytes(int64(len(big)))
	for b.Loop() {
		if !Valid(big) {
			b.Fatal("invalid")
		}
	}
}

func BenchmarkField(b *testing.B) {
	req, err := Decode([]byte(smallCall))
	if err != nil {
		b.Fatal(err)
	}
	params := req.(*jsonrpc.Request).Params
	b.Run("String", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if s, ok := String(params, "name"); !ok || s != "github.search_issues" {
				b.Fatal(s)
			}
		}
	})
	b.Run("SetField", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := SetField(params, "name", []byte(`"search_issues"`)); err != nil {
				b.Fatal(err)
			}
		}
	})
}
