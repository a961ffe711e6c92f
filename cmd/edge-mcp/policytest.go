package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/edge-mcp/edge-mcp/policy"
)

// policyCmd runs edge-mcp policy test: one hook of a module on a recorded
// input, printing the decision, so module authors test without a gateway.
func policyCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "test" {
		return errors.New("usage: edge-mcp policy test MODULE.wasm --hook HOOK --input CASE.json [--config CFG.json]")
	}
	fs := flag.NewFlagSet("policy test", flag.ContinueOnError)
	fs.SetOutput(stderr)
	hookName := fs.String("hook", "", "hook to run: tools_list, tool_call, tool_result, resource_result, prompt_result or event (default: the recorded one)")
	inputFile := fs.String("input", "", "the hook input: a file written by serve --record, or the bare hook input JSON")
	configFile := fs.String("config", "", "the module's config (a JSON object), as the attachment's \"config\"")
	timeout := fs.Duration("timeout", time.Second, "deadline of the hook call")
	pos, err := splitArgs(fs, args[1:])
	if err != nil {
		return err
	}
	if len(pos) != 1 || *inputFile == "" {
		return errors.New("usage: edge-mcp policy test MODULE.wasm --hook HOOK --input CASE.json [--config CFG.json]")
	}
	wasm, err := os.ReadFile(pos[0])
	if err != nil {
		return err
	}
	raw, err := os.ReadFile(*inputFile)
	if err != nil {
		return err
	}
	recorded, input, err := parseRecorded(raw)
	if err != nil {
		return fmt.Errorf("%s: %w", *inputFile, err)
	}
	if *hookName == "" {
		*hookName = recorded
	}
	if *hookName == "" {
		return fmt.Errorf("%s does not say which hook it was recorded for: pass --hook", *inputFile)
	}
	hook, err := policy.ParseHook(*hookName)
	if err != nil {
		return err
	}
	var cfg json.RawMessage
	if *configFile != "" {
		if cfg, err = os.ReadFile(*configFile); err != nil {
			return err
		}
	}
	eng, err := policy.NewEngine(ctx, policy.EngineConfig{})
	if err != nil {
		return err
	}
	defer eng.Close(context.Background())
	m, err := eng.Load(ctx, "test", wasm, policy.ModuleOptions{Config: cfg, Timeout: *timeout, PoolSize: 1})
	if err != nil {
		return err
	}
	defer m.Close()
	out, err := m.Decide(ctx, hook, input)
	if err != nil {
		return fmt.Errorf("%s: %w", hook, err)
	}
	var pretty bytes.Buffer
	json.Indent(&pretty, out, "", "  ")
	pretty.WriteByte('\n')
	_, err = stdout.Write(pretty.Bytes())
	return err
}

// parseRecorded accepts a file written by serve --record ({"hook", "input",
// ...}) or a bare hook input, and returns the hook name (if recorded) and the
// input.
func parseRecorded(raw []byte) (string, json.RawMessage, error) {
	if !json.Valid(raw) {
		return "", nil, errors.New("not valid JSON")
	}
	var rec struct {
		Hook  string          `json:"hook"`
		Input json.RawMessage `json:"input"`
	}
	if err := json.Unmarshal(raw, &rec); err == nil && rec.Hook != "" && len(rec.Input) > 0 {
		return rec.Hook, rec.Input, nil
	}
	return "", raw, nil
}
