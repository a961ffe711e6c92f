//go:build wasip1

// Command content-normalizer is an edge-mcp policy module that makes tool
// results easier on a model's context window: HTML becomes text or simple
// Markdown, oversized text is cut to a byte budget with a note saying what
// was cut, image and audio blocks can be replaced by a short text
// placeholder, and structuredContent is mirrored into a text block when the
// server sent none. It also converts text/html resources. See README.md.
package main

import (
	"errors"
	"strconv"
	"unicode/utf8"

	"github.com/edge-mcp/edge-mcp/guest"
	"github.com/edge-mcp/edge-mcp/guest/jsonlite"
	"github.com/edge-mcp/edge-mcp/wasm-examples/content-normalizer/htmltext"
)

var (
	htmlToText       = true
	markdown         = true
	maxTextBytes     = 0 // 0: no budget
	mediaPlaceholder = false
	mirrorStructured = true
)

func init() {
	guest.OnConfigure(configure)
	guest.OnToolResult(onToolResult)
	guest.OnResourceResult(onResourceResult)
}

func main() {}

func configure(raw []byte) error {
	v, err := jsonlite.Parse(raw)
	if err != nil {
		return errors.New("config: " + err.Error())
	}
	for _, m := range v.Members() {
		switch m.Key {
		case "html_to_text":
			htmlToText = m.Value.Truthy()
		case "markdown":
			markdown = m.Value.Truthy()
		case "max_text_bytes":
			n, ok := m.Value.Int()
			if !ok || n < 0 {
				return errors.New("config: max_text_bytes must be a non-negative integer")
			}
			maxTextBytes = int(n)
		case "media_placeholder":
			mediaPlaceholder = m.Value.Truthy()
		case "mirror_structured":
			mirrorStructured = m.Value.Truthy()
		default:
			return errors.New("config: unknown key " + m.Key)
		}
	}
	return nil
}

func textBlock(s string) *jsonlite.Value {
	b := jsonlite.NewObject()
	b.Set("type", jsonlite.NewString("text"))
	b.Set("text", jsonlite.NewString(s))
	return b
}

func onToolResult(r *guest.ToolResult) error {
	res, err := jsonlite.Parse(r.Result)
	if err != nil {
		return errors.New("content-normalizer: result: " + err.Error())
	}
	changed := false
	content := res.Get("content")
	if content.Kind() != jsonlite.Array {
		content = jsonlite.NewArray()
	}
	items := content.Elems()
	for i, item := range items {
		switch item.Get("type").Str() {
		case "text":
			if htmlToText {
				if t := item.Get("text"); htmltext.LooksLikeHTML(t.Str()) {
					t.SetStr(htmltext.Convert(t.Str(), markdown))
					changed = true
				}
			}
		case "resource":
			if htmlToText && convertResource(item.Get("resource")) {
				changed = true
			}
		case "image", "audio":
			if mediaPlaceholder {
				items[i] = textBlock(placeholder(item))
				changed = true
			}
		}
	}
	if mirrorStructured && res.Has("structuredContent") && !hasText(items) {
		items = append(items, textBlock(string(res.Get("structuredContent").AppendJSON(nil))))
		changed = true
	}
	if maxTextBytes > 0 {
		var cut bool
		if items, cut = truncate(items, maxTextBytes); cut {
			changed = true
		}
	}
	if !changed {
		return nil
	}
	content.SetElems(items)
	res.Set("content", content)
	r.Set(res.AppendJSON(nil))
	return nil
}

func onResourceResult(r *guest.ResourceResult) error {
	if !htmlToText {
		return nil
	}
	res, err := jsonlite.Parse(r.Result)
	if err != nil {
		return errors.New("content-normalizer: result: " + err.Error())
	}
	changed := false
	for _, c := range res.Get("contents").Elems() {
		if convertResource(c) {
			changed = true
		}
	}
	if changed {
		r.Set(res.AppendJSON(nil))
	}
	return nil
}

// convertResource converts an embedded or read text/html resource.
func convertResource(res *jsonlite.Value) bool {
	if res.Get("mimeType").Str() != "text/html" || res.Get("text").Kind() != jsonlite.String {
		return false
	}
	res.Get("text").SetStr(htmltext.Convert(res.Get("text").Str(), markdown))
	if markdown {
		res.Set("mimeType", jsonlite.NewString("text/markdown"))
	} else {
		res.Set("mimeType", jsonlite.NewString("text/plain"))
	}
	return true
}

func hasText(items []*jsonlite.Value) bool {
	for _, it := range items {
		if it.Get("type").Str() == "text" {
			return true
		}
	}
	return false
}

// placeholder describes an image or audio block in a few words.
func placeholder(item *jsonlite.Value) string {
	kind := item.Get("type").Str()
	mime := item.Get("mimeType").Str()
	if mime == "" {
		mime = "unknown type"
	}
	data := item.Get("data").Str()
	n := len(data) * 3 / 4
	for i := len(data) - 1; i >= 0 && i >= len(data)-2 && data[i] == '='; i-- {
		n--
	}
	return "[" + kind + " omitted: " + mime + ", " + humanBytes(n) + "]"
}

func humanBytes(n int) string {
	switch {
	case n >= 1<<20:
		return strconv.FormatFloat(float64(n)/(1<<20), 'f', 1, 64) + " MiB"
	case n >= 1<<10:
		return strconv.FormatFloat(float64(n)/(1<<10), 'f', 1, 64) + " KiB"
	}
	return strconv.Itoa(n) + " bytes"
}

// truncate keeps at most budget bytes of text across the text blocks, in
// order. The block where the budget runs out is cut at a UTF-8 boundary and
// ends with a note; later text blocks are dropped and counted in the note.
func truncate(items []*jsonlite.Value, budget int) ([]*jsonlite.Value, bool) {
	total := 0
	for _, it := range items {
		if it.Get("type").Str() == "text" {
			total += len(it.Get("text").Str())
		}
	}
	if total <= budget {
		return items, false
	}
	out := items[:0]
	left := budget
	kept := 0
	var last *jsonlite.Value
	dropped := 0
	for _, it := range items {
		if it.Get("type").Str() != "text" {
			out = append(out, it)
			continue
		}
		t := it.Get("text").Str()
		switch {
		case left <= 0 && last != nil:
			dropped++
			continue
		case len(t) > left:
			cut := left
			for cut > 0 && !utf8.RuneStart(t[cut]) {
				cut--
			}
			it.Get("text").SetStr(t[:cut])
			kept += cut
			left = 0
		default:
			kept += len(t)
			left -= len(t)
		}
		last = it
		out = append(out, it)
	}
	note := "\n\n[truncated by content-normalizer: kept " + strconv.Itoa(kept) + " of " + strconv.Itoa(total) + " bytes of text, " + strconv.Itoa(total-kept) + " bytes cut"
	if dropped > 0 {
		note += ", " + strconv.Itoa(dropped) + " text block(s) dropped"
	}
	note += "]"
	last.Get("text").SetStr(last.Get("text").Str() + note)
	return out, true
}
