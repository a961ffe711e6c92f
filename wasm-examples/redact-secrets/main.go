// Command redact-secrets is an edge-mcp policy module that masks secrets
// and personal data in tool call arguments (tool_call → rewrite), tool
// results, resources/read results and prompts/get results. See README.md.
package main

import (
	"errors"

	"github.com/edge-mcp/edge-mcp/guest"
	"github.com/edge-mcp/edge-mcp/guest/jsonlite"
	"github.com/edge-mcp/edge-mcp/wasm-examples/redact-secrets/redact"
)

var (
	red       *redact.Redactor
	arguments = true
	results   = true

	outBuf []byte // the rewritten document; reused across calls
)

func init() {
	red, _ = redact.New(redact.Config{})
	guest.OnConfigure(configure)
	guest.OnToolCall(onToolCall)
	guest.OnToolResult(func(r *guest.ToolResult) error { return redactResult(r.Result, r.Set) })
	guest.OnResourceResult(func(r *guest.ResourceResult) error { return redactResult(r.Result, r.Set) })
	guest.OnPromptResult(func(r *guest.PromptResult) error { return redactResult(r.Result, r.Set) })
}

func main() {}

func configure(raw []byte) error {
	v, err := jsonlite.Parse(raw)
	if err != nil {
		return errors.New("config: " + err.Error())
	}
	var cfg redact.Config
	for _, m := range v.Members() {
		switch m.Key {
		case "replacement":
			cfg.Replacement = m.Value.Str()
		case "disable":
			for _, name := range m.Value.Strings() {
				k, ok := redact.ParseKind(name)
				if !ok {
					return errors.New("config: unknown kind \"" + name + "\" in disable (api_key, bearer, jwt, private_key, email, card, custom)")
				}
				cfg.Disable = append(cfg.Disable, k)
			}
		case "tokens":
			for _, t := range m.Value.Elems() {
				n, _ := t.Get("min_length").Int()
				cfg.Tokens = append(cfg.Tokens, redact.Token{
					Prefix:  t.Get("prefix").Str(),
					MinLen:  int(n),
					Charset: t.Get("charset").Str(),
				})
			}
		case "literals":
			cfg.Literals = m.Value.Strings()
		case "arguments":
			arguments = m.Value.Kind() != jsonlite.Bool || m.Value.Truthy()
		case "results":
			results = m.Value.Kind() != jsonlite.Bool || m.Value.Truthy()
		default:
			return errors.New("config: unknown key " + m.Key)
		}
	}
	r, err := redact.New(cfg)
	if err != nil {
		return err
	}
	red = r
	return nil
}

// The redactor works on JSON text as it is: it never matches across a
// quote, treats escapes as word boundaries and writes JSON-safe
// replacements, so the whole arguments object or result is redacted in one
// pass with no parsing. Base64 payloads (image/audio data, blobs) cannot
// hold the separators the patterns need and pass through unchanged.

func onToolCall(c *guest.ToolCall) guest.Decision {
	if !arguments {
		return guest.Allow()
	}
	out, changed := red.Redact(outBuf[:0], c.Arguments)
	if !changed {
		return guest.Allow()
	}
	outBuf = out
	return guest.Rewrite(out)
}

// redactResult redacts a result document and hands a changed one to set.
func redactResult(result []byte, set func([]byte)) error {
	if !results {
		return nil
	}
	out, changed := red.Redact(outBuf[:0], result)
	if changed {
		outBuf = out
		set(out)
	}
	return nil
}
