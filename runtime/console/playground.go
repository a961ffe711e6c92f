package console

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/edge-mcp/edge-mcp/runtime/admin"
)

// playgroundTimeout bounds one playground call.
const playgroundTimeout = 60 * time.Second

// maxExchange bounds the messages one playground call shows.
const maxExchange = 64

// Message is one JSON-RPC message of a playground exchange.
type Message struct {
	// ToGateway is true for what the console sent as the client.
	ToGateway bool
	JSON      string // indented
}

type playgroundData struct {
	Identities []string
	AnyName    bool // any identity name may be typed (JWT)
	Tools      []Tool
	Identity   string
	Tool       string
	Arguments  string
	Exchange   []Message
	Problem    string // why the call was not sent
}

// playgroundForm is the playground's form, filled from a GET's query (a
// link from the catalogue) or a POST.
func (c *Console) playgroundForm(r *http.Request) playgroundData {
	names, any := c.src.ClientIdentities()
	d := playgroundData{Identities: names, AnyName: any, Tools: c.src.Tools(),
		Identity: strings.TrimSpace(r.FormValue("identity")), Tool: strings.TrimSpace(r.FormValue("tool")),
		Arguments: r.FormValue("arguments")}
	if d.Arguments == "" {
		d.Arguments = "{}"
	}
	return d
}

func (c *Console) playground(r *http.Request) (string, any, error) {
	return "playground.html", c.playgroundForm(r), nil
}

// playgroundCall calls a tool as the chosen identity through an in-process
// session of the gateway (Source.ServeAs) and shows every JSON-RPC message
// of the exchange. A form the gateway cannot send (unknown identity, no
// tool, arguments not a JSON object) comes back with the reason and
// nothing lost.
func (c *Console) playgroundCall(r *http.Request) (string, any, error) {
	d := c.playgroundForm(r)
	var args map[string]json.RawMessage
	switch {
	case d.Identity == "":
		d.Problem = "choose the identity to call as"
	case !d.AnyName && !slices.Contains(d.Identities, d.Identity):
		d.Problem = "the gateway admits no client identity " + quote(d.Identity)
	case d.Tool == "":
		d.Problem = "name the tool to call"
	default:
		if err := json.Unmarshal([]byte(d.Arguments), &args); err != nil || args == nil {
			d.Problem = "the arguments must be a JSON object: " + errText(err)
		}
	}
	if d.Problem != "" {
		return "playground.html", d, nil
	}
	params, _ := json.Marshal(struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}{d.Tool, compact(d.Arguments)})
	ctx, cancel := context.WithTimeout(r.Context(), playgroundTimeout)
	defer cancel()
	ex, err := c.exchange(ctx, d.Identity, &jsonrpc.Request{ID: mustID(1), Method: "tools/call", Params: params})
	d.Exchange = ex
	c.audit(admin.Record{Time: c.now().UTC(), Identity: admin.Identity(r.Context()), Action: "playground.call",
		Target: d.Tool, Detail: "as " + d.Identity + " from the console"})
	if err != nil {
		d.Problem = err.Error()
	}
	return "playground.html", d, nil
}

func errText(err error) string {
	if err == nil {
		return "null is not an object"
	}
	return err.Error()
}

func quote(s string) string { b, _ := json.Marshal(s); return string(b) }

func compact(s string) json.RawMessage {
	var b bytes.Buffer
	json.Compact(&b, []byte(s))
	return b.Bytes()
}

func mustID(n float64) jsonrpc.ID {
	id, _ := jsonrpc.MakeID(n)
	return id
}

// exchange sends req on a fresh in-process session of identity and
// returns every message until its answer. Requests the session sends the
// client (sampling, elicitation, roots) are answered "method not found":
// the playground is a client without capabilities.
func (c *Console) exchange(ctx context.Context, identity string, req *jsonrpc.Request) ([]Message, error) {
	conn := newPipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.src.ServeAs(identity, conn)
	}()
	defer func() {
		conn.Close()
		<-done
	}()
	var ex []Message
	add := func(to bool, m jsonrpc.Message) {
		if len(ex) == maxExchange {
			return
		}
		b, err := jsonrpc.EncodeMessage(m)
		var out bytes.Buffer
		if err != nil || json.Indent(&out, b, "", "  ") != nil {
			out.Reset()
			out.Write(b)
		}
		ex = append(ex, Message{ToGateway: to, JSON: out.String()})
	}
	add(true, req)
	if err := conn.deliver(ctx, req); err != nil {
		return ex, err
	}
	for {
		msg, err := conn.receive(ctx)
		if err != nil {
			if errors.Is(err, context.DeadlineExceeded) {
				err = errors.New("no answer within " + playgroundTimeout.String())
			}
			return ex, err
		}
		add(false, msg)
		switch m := msg.(type) {
		case *jsonrpc.Response:
			if m.ID == req.ID {
				return ex, nil
			}
		case *jsonrpc.Request:
			if m.IsCall() {
				ans := &jsonrpc.Response{ID: m.ID, Error: &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound,
					Message: "edge-mcp console: the playground cannot answer " + m.Method}}
				add(true, ans)
				if err := conn.deliver(ctx, ans); err != nil {
					return ex, err
				}
			}
		}
	}
}

var errPipeClosed = errors.New("edge-mcp console: in-process connection closed")

// pipe is an in-process connection between the playground (the client)
// and one session of the gateway.
type pipe struct {
	in   chan jsonrpc.Message // console → session
	out  chan jsonrpc.Message // session → console
	done chan struct{}
	once sync.Once
}

var _ mcp.Connection = (*pipe)(nil)

func newPipe() *pipe {
	return &pipe{in: make(chan jsonrpc.Message, 4), out: make(chan jsonrpc.Message, 16), done: make(chan struct{})}
}

// Read is the session's side.
func (p *pipe) Read(ctx context.Context) (jsonrpc.Message, error) {
	select {
	case m := <-p.in:
		return m, nil
	case <-p.done:
		return nil, errPipeClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Write is the session's side.
func (p *pipe) Write(ctx context.Context, m jsonrpc.Message) error {
	select {
	case p.out <- m:
		return nil
	case <-p.done:
		return errPipeClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (p *pipe) Close() error { p.once.Do(func() { close(p.done) }); return nil }

func (p *pipe) SessionID() string { return "" }

func (p *pipe) deliver(ctx context.Context, m jsonrpc.Message) error {
	select {
	case p.in <- m:
		return nil
	case <-p.done:
		return errPipeClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (p *pipe) receive(ctx context.Context) (jsonrpc.Message, error) {
	select {
	case m := <-p.out:
		return m, nil
	case <-p.done:
		return nil, errors.New("the session ended before the call was answered")
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
