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

// policyTestFlags defines edge-mcp policy test: one hook of a module on a
// recorded input, printing the decision, so module authors test without a
// gateway.
func policyTestFlags(fs *flag.FlagSet) runFunc {
	var o policyTestOptions
	fs.StringVar(&o.hook, "hook", "", "hook to run: tools_list, tool_call, tool_result, resource_result, prompt_result or event (default: the recorded one)")
	fs.StringVar(&o.input, "input", "", "the hook input: a file written by serve --record, or the bare hook input JSON")
	fs.StringVar(&o.vectors, "vectors", "", "a JSON file of test vectors to run instead of one input: prints a line per vector and fails if any fails")
	fs.StringVar(&o.config, "config", "", "the module's config (a JSON object), as the attachment's \"config\"")
	fs.DurationVar(&o.timeout, "timeout", time.Second, "deadline of the hook call")
	fs.DurationVar(&o.initTimeout, "init-timeout", 10*time.Second, "deadline for starting the module's instance (instantiation, _initialize, edge_configure); longer than the gateway's 1 s, since a test run may share a busy machine")
	return func(ctx context.Context, pos []string, s streams) error {
		switch {
		case o.input != "" && o.vectors != "":
			return usagef("edge-mcp policy test: --input and --vectors exclude each other")
		case o.vectors != "":
			return policyTestVectors(ctx, pos[0], o, s.stdout)
		case o.input == "":
			return usagef("edge-mcp policy test: --input or --vectors is required; run 'edge-mcp policy test --help'")
		}
		return policyTest(ctx, pos[0], o, s.stdout)
	}
}

type policyTestOptions struct {
	hook, input, config, vectors string
	timeout, initTimeout         time.Duration
}

func policyTest(ctx context.Context, module string, o policyTestOptions, stdout io.Writer) error {
	wasm, err := os.ReadFile(module)
	if err != nil {
		return err
	}
	raw, err := os.ReadFile(o.input)
	if err != nil {
		return err
	}
	recorded, input, err := parseRecorded(raw)
	if err != nil {
		return fmt.Errorf("%s: %w", o.input, err)
	}
	if o.hook == "" {
		o.hook = recorded
	}
	if o.hook == "" {
		return fmt.Errorf("%s does not say which hook it was recorded for: pass --hook", o.input)
	}
	hook, err := policy.ParseHook(o.hook)
	if err != nil {
		return err
	}
	eng, m, err := loadForTest(ctx, wasm, o)
	if err != nil {
		return err
	}
	defer eng.Close(context.Background())
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

// loadForTest loads a module into an engine of its own, with the config
// file of o if any. The caller closes both.
func loadForTest(ctx context.Context, wasm []byte, o policyTestOptions) (*policy.Engine, *policy.Module, error) {
	var cfg json.RawMessage
	if o.config != "" {
		var err error
		if cfg, err = os.ReadFile(o.config); err != nil {
			return nil, nil, err
		}
	}
	eng, err := policy.NewEngine(ctx, policy.EngineConfig{})
	if err != nil {
		return nil, nil, err
	}
	m, err := eng.Load(ctx, "test", wasm, policy.ModuleOptions{Config: cfg, Timeout: o.timeout, InitTimeout: o.initTimeout, PoolSize: 1})
	if err != nil {
		eng.Close(context.Background())
		return nil, nil, err
	}
	return eng, m, nil
}

// policyTestVectors runs a module against a file of test vectors (the
// format of module push --vectors), printing "ok" or "FAIL" and the reason
// per vector and a closing count; it fails when a vector fails.
func policyTestVectors(ctx context.Context, module string, o policyTestOptions, stdout io.Writer) error {
	wasm, err := os.ReadFile(module)
	if err != nil {
		return err
	}
	raw, err := os.ReadFile(o.vectors)
	if err != nil {
		return err
	}
	vs, err := policy.ParseTestVectors(raw)
	if err != nil {
		return fmt.Errorf("%s: %w", o.vectors, err)
	}
	eng, m, err := loadForTest(ctx, wasm, o)
	if err != nil {
		return err
	}
	defer eng.Close(context.Background())
	defer m.Close()
	failed := 0
	for i := range vs {
		if err := m.RunVectors(ctx, vs[i:i+1]); err != nil {
			if ctx.Err() != nil {
				return err
			}
			failed++
			fmt.Fprintf(stdout, "FAIL %s\n     %v\n", vs[i].Name, err)
			continue
		}
		fmt.Fprintf(stdout, "ok   %s\n", vs[i].Name)
	}
	fmt.Fprintf(stdout, "%s: %d passed, %d failed\n", module, len(vs)-failed, failed)
	if failed > 0 {
		return fmt.Errorf("%s: %d of %d test vectors failed", module, failed, len(vs))
	}
	return nil
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
