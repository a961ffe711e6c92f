package oauth

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"time"

	"github.com/nats-io/nats.go"
)

// NATSRelay forwards authorization redirects between the replicas of a
// fleet by NATS request/reply. The replica that started an authorization
// subscribes, while it is pending, to "<prefix>.<hash of state>"; a
// replica that receives a redirect whose state it does not own sends the
// redirect's parameters there and shows the page the owner answers. The
// subject is a hash of state, so a state from the browser never makes a
// subject of its own. The owner takes the state once (the single use
// holds fleet-wide: it unsubscribes as it takes it). The messages travel
// sealed by the fleet (Bus): a party on NATS without the fleet's secret
// can neither read a forwarded code nor answer in the owner's place.
type NATSRelay struct {
	bus    Bus
	prefix string // e.g. "edge.oauth.callback"
	log    *slog.Logger
}

// Bus carries the relay's messages between the replicas of a fleet (the
// fleet's cluster.Node): sealed when sent, delivered only when a replica
// of the fleet sealed them.
type Bus interface {
	// Subscribe calls fn with each message on subject; respond answers it.
	Subscribe(subject string, fn func(body []byte, respond func([]byte) error)) (unsubscribe func(), err error)
	// Request sends body on subject and returns the answer.
	Request(ctx context.Context, subject string, body []byte) ([]byte, error)
	// Flush waits until the server has what was sent.
	Flush(timeout time.Duration) error
	// Connected reports whether NATS is reachable now.
	Connected() bool
}

// relayWait bounds a forwarded redirect: the owner answers once the
// token exchange ended (callbackWait) or says it is still running.
const relayWait = callbackWait + 5*time.Second

// maxRelayMessage caps a forwarded redirect or its answer.
const maxRelayMessage = 16 << 10

// NewNATSRelay returns a relay on bus under the subject prefix.
func NewNATSRelay(bus Bus, prefix string, log *slog.Logger) *NATSRelay {
	return &NATSRelay{bus: bus, prefix: prefix, log: log}
}

// relayRequest is a forwarded redirect: the parameters of the callback.
type relayRequest struct {
	State string `json:"state"`
	Code  string `json:"code,omitempty"`
	Iss   string `json:"iss,omitempty"`
	Error string `json:"error,omitempty"`
}

// relayReply is the owner's page.
type relayReply struct {
	Status  int    `json:"status"`
	Message string `json:"message"`
}

func (r *NATSRelay) subject(state string) string {
	sum := sha256.Sum256([]byte("edge-mcp oauth state\x00" + state))
	return r.prefix + "." + hex.EncodeToString(sum[:16])
}

// Own implements Relay.
func (r *NATSRelay) Own(state string, complete func(ctx context.Context, q url.Values) (int, string)) (func(), error) {
	unsubscribe, err := r.bus.Subscribe(r.subject(state), func(data []byte, respond func([]byte) error) {
		req, err := decodeRelayRequest(data)
		if err != nil || req.State != state {
			r.log.Warn("forwarded authorization redirect refused", "err", err)
			return // the sender times out and refuses the redirect
		}
		q := url.Values{"state": {req.State}}
		for k, v := range map[string]string{"code": req.Code, "iss": req.Iss, "error": req.Error} {
			if v != "" {
				q.Set(k, v)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), relayWait)
		defer cancel()
		code, text := complete(ctx, q)
		out, _ := json.Marshal(relayReply{Status: code, Message: text})
		if err := respond(out); err != nil {
			r.log.Warn("answering a forwarded authorization redirect", "err", err)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("subscribing to the redirects of an authorization: %w", err)
	}
	// The subscription must be known to the server before the URL is
	// shown, else an early redirect finds no owner.
	if err := r.bus.Flush(2 * time.Second); err != nil {
		r.log.Debug("flushing the redirect subscription", "err", err)
	}
	return unsubscribe, nil
}

// Forward implements Relay. No replica owning state, NATS unreachable or
// an answer that does not decode: ok is false and the redirect is
// refused as unknown.
func (r *NATSRelay) Forward(ctx context.Context, state string, q url.Values) (int, string, bool) {
	if !r.bus.Connected() {
		r.log.Warn("an authorization redirect for another replica cannot be forwarded: the fleet's NATS is not reachable")
		return 0, "", false
	}
	body, err := json.Marshal(relayRequest{State: state, Code: q.Get("code"), Iss: q.Get("iss"), Error: q.Get("error")})
	if err != nil || len(body) > maxRelayMessage {
		return 0, "", false
	}
	ctx, cancel := context.WithTimeout(ctx, relayWait)
	defer cancel()
	answer, err := r.bus.Request(ctx, r.subject(state), body)
	if err != nil {
		if !errors.Is(err, nats.ErrNoResponders) {
			r.log.Warn("forwarding an authorization redirect to its replica", "err", err)
		}
		return 0, "", false
	}
	rep, err := decodeRelayReply(answer)
	if err != nil {
		r.log.Warn("answer to a forwarded authorization redirect refused", "err", err)
		return 0, "", false
	}
	return rep.Status, rep.Message, true
}

func decodeRelayRequest(data []byte) (relayRequest, error) {
	var req relayRequest
	if len(data) > maxRelayMessage {
		return req, errors.New("too large")
	}
	if err := json.Unmarshal(data, &req); err != nil {
		return req, fmt.Errorf("malformed: %w", err)
	}
	if req.State == "" {
		return req, errors.New("no state")
	}
	return req, nil
}

func decodeRelayReply(data []byte) (relayReply, error) {
	var rep relayReply
	if len(data) > maxRelayMessage {
		return rep, errors.New("too large")
	}
	if err := json.Unmarshal(data, &rep); err != nil {
		return rep, fmt.Errorf("malformed: %w", err)
	}
	if rep.Status < 200 || rep.Status > 599 || rep.Message == "" {
		return rep, fmt.Errorf("status %d out of range", rep.Status)
	}
	return rep, nil
}
