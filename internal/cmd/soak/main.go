// Command soak runs the loaded restart scenario of BENCHMARKS.md against
// the edge-mcp binary: one streamable-HTTP upstream (internal/cmd/echoserver)
// that is SIGKILLed every -kill-every and started again -down later on the
// same port; -clients MCP clients calling its echo tool -rate times a
// second each, with a secret in the text that an attached redact-secrets
// policy must mask; an upload of an unattached module every -upload-every
// and a config reload (the policy's replacement alternates) every
// -reload-every. It prints the calls, how many were served, the failures
// by reason, the outages the clients saw, and RSS and goroutines before,
// at the peak and after; -csv writes one sample a second (RSS, goroutines,
// calls served and failed), and -plot draws such files (before and
// after) into a PNG:
//
//	soak -duration 150s -edge-mcp bin/edge-mcp -echoserver .tools/bin/echoserver -wasm bin/wasm/redact-secrets.wasm -csv after.csv
//	soak -plot before.csv -plot after.csv -png docs/soak.png
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"
)

// listFlag collects a repeated flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

func main() {
	var sc scenario
	var plots listFlag
	var pngOut, csvOut string
	flag.DurationVar(&sc.Duration, "duration", 150*time.Second, "how long the load runs")
	flag.StringVar(&sc.EdgeMCP, "edge-mcp", "bin/edge-mcp", "the edge-mcp binary")
	flag.StringVar(&sc.EchoServer, "echoserver", ".tools/bin/echoserver", "the upstream binary (internal/cmd/echoserver)")
	flag.StringVar(&sc.Wasm, "wasm", "bin/wasm/redact-secrets.wasm", "the redact-secrets module (go tool task wasm)")
	flag.IntVar(&sc.Clients, "clients", 4, "MCP clients")
	flag.Float64Var(&sc.Rate, "rate", 10, "calls a second per client")
	flag.DurationVar(&sc.KillEvery, "kill-every", 30*time.Second, "the upstream is killed this often")
	flag.DurationVar(&sc.Down, "down", 3*time.Second, "and started again this much later")
	flag.DurationVar(&sc.UploadEvery, "upload-every", 20*time.Second, "an unattached module is uploaded this often (0: never)")
	flag.DurationVar(&sc.ReloadEvery, "reload-every", 15*time.Second, "the config is changed and reloaded this often (0: never)")
	flag.DurationVar(&sc.Warm, "warm", 3*time.Second, "how long after the clients connected RSS is read before the load")
	flag.DurationVar(&sc.Settle, "settle", 15*time.Second, "how long after the load RSS is read again")
	flag.StringVar(&csvOut, "csv", "", "write one sample a second to this CSV file")
	flag.Var(&plots, "plot", "draw this CSV file (repeat: before, after) into -png instead of running")
	flag.StringVar(&pngOut, "png", "", "the PNG -plot writes")
	flag.Parse()

	if len(plots) > 0 {
		if pngOut == "" {
			fail(fmt.Errorf("-plot needs -png"))
		}
		if err := plotFiles(plots, pngOut); err != nil {
			fail(err)
		}
		return
	}
	rep, err := sc.run(context.Background(), os.Stderr)
	if err != nil {
		fail(err)
	}
	rep.print(os.Stdout)
	if csvOut != "" {
		if err := rep.writeCSV(csvOut); err != nil {
			fail(err)
		}
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "soak:", err)
	os.Exit(1)
}
