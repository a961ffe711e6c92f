package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// secret is what every call's text carries; the redact-secrets policy
// must mask it in every answer.
const secret = "sk-proj-AbCdEf0123456789AbCdEf0123456789xyz"

// scenario is what soak runs (see the package documentation).
type scenario struct {
	Duration                 time.Duration
	EdgeMCP, EchoServer      string
	Wasm                     string
	Clients                  int
	Rate                     float64
	KillEvery, Down          time.Duration
	UploadEvery, ReloadEvery time.Duration
	Warm, Settle             time.Duration // quiet before the load, and after it
}

// result is one call's outcome.
type result struct {
	start, end time.Time
	reason     string // "" when served
}

// run runs the scenario and reports; progress goes to logw.
func (sc *scenario) run(ctx context.Context, logw io.Writer) (*report, error) {
	dir, err := os.MkdirTemp("", "edge-mcp-soak")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	wasmPath, err := filepath.Abs(sc.Wasm) // the config's paths are relative to its folder
	if err != nil {
		return nil, err
	}
	wasm, err := os.ReadFile(wasmPath)
	if err != nil {
		return nil, fmt.Errorf("reading the module: %w", err)
	}
	upAddr, gwAddr, adminAddr := freeAddr(), freeAddr(), freeAddr()
	up := &process{bin: sc.EchoServer, args: []string{"-http", upAddr}, addr: upAddr}
	if err := up.start(); err != nil {
		return nil, err
	}
	defer up.kill()

	cfgPath := filepath.Join(dir, "edge-mcp.json")
	if err := writeConfig(cfgPath, "http://"+upAddr+"/mcp", wasmPath, "A"); err != nil {
		return nil, err
	}
	logf, err := os.Create(filepath.Join(dir, "edge-mcp.log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	gw := &process{bin: sc.EdgeMCP, addr: gwAddr, out: logf, env: []string{"XDG_CACHE_HOME=" + filepath.Join(dir, "cache")},
		args: []string{"serve", "--config", cfgPath, "--listen", gwAddr, "--admin", adminAddr, "--state-dir", filepath.Join(dir, "state")}}
	if err := gw.start(); err != nil {
		b, _ := os.ReadFile(logf.Name())
		return nil, fmt.Errorf("%w:\n%s", err, b)
	}
	defer gw.kill()
	base := "http://" + gwAddr
	if err := waitConnected(ctx, base); err != nil {
		return nil, err
	}

	sessions := make([]*mcp.ClientSession, sc.Clients)
	for i := range sessions {
		c := mcp.NewClient(&mcp.Implementation{Name: "soak-" + strconv.Itoa(i), Version: "1"}, nil)
		cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: base + "/mcp"}, nil)
		if err != nil {
			return nil, fmt.Errorf("connecting client %d: %w", i, err)
		}
		defer cs.Close()
		sessions[i] = cs
		if r := call(ctx, cs, "warm-up key "+secret); r.reason != "" {
			return nil, fmt.Errorf("warm-up call of client %d: %s", i, r.reason)
		}
	}
	time.Sleep(sc.Warm)
	rep := &report{Failed: map[string]int{}}
	rep.RSSBefore, rep.GoroutinesBefore = rssMiB(gw.pid()), goroutines(base)
	fmt.Fprintf(logw, "soak: %d clients at %g calls/s for %s; upstream killed every %s for %s; RSS %.1f MiB, %d goroutines\n",
		sc.Clients, sc.Rate, sc.Duration, sc.KillEvery, sc.Down, rep.RSSBefore, rep.GoroutinesBefore)

	var (
		mu      sync.Mutex
		results []result
		calls   sync.WaitGroup
	)
	loadCtx, stop := context.WithTimeout(ctx, sc.Duration)
	defer stop()
	t0 := time.Now()
	var bg sync.WaitGroup
	for i, cs := range sessions {
		bg.Add(1)
		go func() {
			defer bg.Done()
			tick := time.NewTicker(time.Duration(float64(time.Second) / sc.Rate))
			defer tick.Stop()
			for n := 0; ; n++ {
				select {
				case <-loadCtx.Done():
					return
				case <-tick.C:
				}
				calls.Add(1)
				go func() {
					defer calls.Done()
					r := call(ctx, cs, fmt.Sprintf("client %d call %d key %s end", i, n, secret))
					mu.Lock()
					results = append(results, r)
					mu.Unlock()
				}()
			}
		}()
	}
	var downs []time.Duration
	bg.Add(1)
	go func() { // the upstream's outages
		defer bg.Done()
		for k := 1; ; k++ {
			at := t0.Add(time.Duration(k) * sc.KillEvery)
			if at.Add(sc.Down).After(t0.Add(sc.Duration)) || !sleepUntil(loadCtx, at) {
				return // no outage that would outlast the load
			}
			up.kill()
			killed := time.Now()
			time.Sleep(sc.Down)
			if err := up.start(); err != nil {
				fmt.Fprintf(logw, "soak: restarting the upstream: %v\n", err)
			}
			downs = append(downs, time.Since(killed))
			fmt.Fprintf(logw, "soak: %5.1fs upstream killed and back after %s\n", killed.Sub(t0).Seconds(), time.Since(killed).Round(time.Millisecond))
		}
	}()
	every(loadCtx, &bg, sc.UploadEvery, func() {
		if err := upload(base, adminAddr, wasm); err != nil {
			fmt.Fprintf(logw, "soak: upload: %v\n", err)
		}
	})
	version := 0
	every(loadCtx, &bg, sc.ReloadEvery, func() {
		version++
		if err := writeConfig(cfgPath, "http://"+upAddr+"/mcp", wasmPath, string(rune('A'+version%2))); err != nil {
			fmt.Fprintf(logw, "soak: reload: %v\n", err)
		}
	})
	samplesDone := make(chan struct{})
	sampleCtx, stopSampling := context.WithCancel(ctx)
	go func() {
		defer close(samplesDone)
		sampleEverySecond(sampleCtx, t0, gw.pid(), base, &mu, &results, rep)
	}()

	<-loadCtx.Done()
	bg.Wait()
	calls.Wait()
	time.Sleep(sc.Settle)
	stopSampling()
	<-samplesDone
	rep.RSSAfter, rep.GoroutinesAfter = rssMiB(gw.pid()), goroutines(base)
	rep.tally(results)
	rep.UpstreamDown = downs
	return rep, nil
}

// every runs f every d until ctx ends (d 0: never), counted in wg.
func every(ctx context.Context, wg *sync.WaitGroup, d time.Duration, f func()) {
	if d <= 0 {
		return
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(d)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				f()
			}
		}
	}()
}

func sleepUntil(ctx context.Context, at time.Time) bool {
	t := time.NewTimer(time.Until(at))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// call calls echo once and classifies the outcome.
func call(ctx context.Context, cs *mcp.ClientSession, text string) result {
	r := result{start: time.Now()}
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": text}})
	r.end = time.Now()
	switch {
	case err != nil:
		r.reason = classify(err)
	case res.IsError:
		r.reason = "tool error"
	default:
		var b strings.Builder
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				b.WriteString(tc.Text)
			}
		}
		if strings.Contains(b.String(), "sk-proj") || !strings.Contains(b.String(), "[REDACTED") {
			r.reason = "UNREDACTED"
		}
	}
	return r
}

// classify names the reason of a failed call.
func classify(err error) string {
	msg := err.Error()
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "no answer within 20s"
	case strings.Contains(msg, "is disconnected"), strings.Contains(msg, "is not connected"):
		return "server disconnected"
	case strings.Contains(msg, "sending tools/call"):
		return "sending failed"
	case strings.Contains(msg, "disconnected"):
		return "disconnected while in flight"
	case strings.Contains(msg, "did not answer"):
		return "timeout"
	}
	if len(msg) > 80 {
		msg = msg[:80]
	}
	return msg
}

// writeConfig writes the gateway's config: the upstream and the redact
// policy, whose replacement (variant) a reload changes.
func writeConfig(path, upURL, wasm, variant string) error {
	doc := fmt.Sprintf(`{"log_level": "warn", "mcpServers": {"up": {"url": %q}},
  "policies": [{"name": "redact", "module": %q, "tools": ["*"], "config": {"replacement": "[REDACTED-%s]"}}]}`, upURL, wasm, variant)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(doc), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// upload puts wasm as the unattached module "spare".
func upload(base, admin string, wasm []byte) error {
	req, _ := http.NewRequest(http.MethodPut, "http://"+admin+"/admin/modules/spare", bytes.NewReader(wasm))
	req.Header.Set("Content-Type", "application/wasm")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("%s: %s", resp.Status, b)
	}
	return nil
}

// sampleEverySecond records RSS, goroutines and the calls answered in
// each second until ctx ends.
func sampleEverySecond(ctx context.Context, t0 time.Time, pid int, base string, mu *sync.Mutex, results *[]result, rep *report) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	seen := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s := sample{T: time.Since(t0).Seconds(), RSS: rssMiB(pid), Goroutines: goroutines(base)}
		mu.Lock()
		for _, r := range (*results)[seen:] {
			if r.reason == "" {
				s.Served++
			} else {
				s.Failed++
			}
		}
		seen = len(*results)
		mu.Unlock()
		rep.Samples = append(rep.Samples, s)
		rep.RSSPeak = max(rep.RSSPeak, s.RSS)
	}
}

// rssMiB is the VmRSS of pid in MiB (0 when unknown).
func rssMiB(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			return kb / 1024
		}
	}
	return 0
}

// goroutines reads go_goroutines from the gateway's /metrics (-1 when
// unknown).
func goroutines(base string) int {
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "go_goroutines "); ok {
			n, _ := strconv.ParseFloat(v, 64)
			return int(n)
		}
	}
	return -1
}

// waitConnected waits up to 30 s for the gateway's /status to show its
// upstream connected.
func waitConnected(ctx context.Context, base string) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(base + "/status")
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if bytes.Contains(b, []byte(`"connected"`)) {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the gateway's upstream did not connect within 30s (%v)", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// process is a child process listening on addr.
type process struct {
	bin  string
	args []string
	env  []string
	addr string
	out  io.Writer
	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// start starts the process and waits up to 20 s until it listens.
func (p *process) start() error {
	cmd := exec.Command(p.bin, p.args...)
	cmd.Env = append(os.Environ(), p.env...)
	cmd.Stdout, cmd.Stderr = p.out, p.out
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", p.bin, err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	p.mu.Lock()
	p.cmd, p.done = cmd, done
	p.mu.Unlock()
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", p.addr, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		select {
		case <-done:
			return fmt.Errorf("%s exited at start", p.bin)
		default:
		}
		if time.Now().After(deadline) {
			p.kill()
			return fmt.Errorf("%s does not listen on %s", p.bin, p.addr)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (p *process) pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// kill SIGKILLs the process and waits for it.
func (p *process) kill() {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.cmd = nil
	p.mu.Unlock()
	if cmd != nil {
		cmd.Process.Kill()
		<-done
	}
}

// freeAddr is a 127.0.0.1 address whose port was free a moment ago.
func freeAddr() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// sortByEnd sorts results by when they were answered.
func sortByEnd(rs []result) {
	sort.Slice(rs, func(i, j int) bool { return rs[i].end.Before(rs[j].end) })
}
