package oauth

import (
	"context"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/edge-mcp/edge-mcp/runtime/cluster"
	"github.com/edge-mcp/edge-mcp/runtime/config"
)

// With a cluster section, upstream OAuth state is the fleet's: the tokens
// live in the JetStream KV bucket "<fleet>_oauth", sealed with oauth.key
// as in the single-replica file store (kvstore.go), and a redirect that
// reaches a replica other than the one that started the authorization is
// forwarded to it by NATS request/reply (relay.go).

// CheckFleetKey refuses a fleet whose replicas would each generate
// their own token key: a token sealed by one could not be opened by the
// others.
func CheckFleetKey(cfg *config.Config) error {
	if cfg.Cluster == nil || cfg.OAuth.Key != "" || cfg.OAuth.KeyFile != "" {
		return nil
	}
	for _, sc := range cfg.Servers {
		if sc.OAuth != nil {
			file := cfg.Path
			if file == "" {
				file = "config"
			}
			return fmt.Errorf("%s: oauth.key: with a \"cluster\" section every replica must seal upstream tokens with the same key (server %q has an \"oauth\" section); set oauth.key or oauth.key_file to the same 32-byte key on every replica", file, sc.Name)
		}
	}
	return nil
}

// JoinFleet makes the fleet's bucket the token store, sealed with key
// (ConfigKey), and NATS the carrier of redirects between replicas. leave
// stops the store's watch and retries; call it before closing node.
func (m *Manager) JoinFleet(node *cluster.Node, key []byte) (leave func(), err error) {
	sealer, err := NewSealer(key)
	if err != nil {
		return nil, err
	}
	open := func(ctx context.Context) (jetstream.KeyValue, error) { return openOAuthBucket(ctx, node) }
	kv := NewKVStore(open, node.Connected, sealer, m.log, m.Changed)
	kv.UseFleetSeal(NewNATSSeal(node, key))
	m.UseFleet(kv, NewNATSRelay(oauthBus{node}, node.Subject("oauth", "callback"), m.log))
	return kv.Close, nil
}

// NATSSeal is the fleet's seal of the token records (a FleetSeal): keys
// are an HMAC of server and identity under a key derived from oauth.key
// (the same on every replica, and not rotated with cluster.secret, so a
// rotation does not move the records), values sealed again with the
// fleet's keys.
type NATSSeal struct {
	n     *cluster.Node
	hash  []byte
	marks cluster.Watermarks
}

// NewNATSSeal is the seal of node's fleet under oauthKey.
func NewNATSSeal(n *cluster.Node, oauthKey []byte) *NATSSeal {
	k, _ := hkdf.Key(sha256.New, oauthKey, nil, "edge-mcp oauth kv key v1", 32) // cannot fail for 32 bytes
	return &NATSSeal{n: n, hash: k}
}

func (s *NATSSeal) Key(server, identity string) string {
	m := hmac.New(sha256.New, s.hash)
	m.Write([]byte(server))
	m.Write([]byte{0})
	m.Write([]byte(identity))
	return "tok." + hex.EncodeToString(m.Sum(nil)[:16])
}

func (s *NATSSeal) Seal(key string, body []byte) []byte {
	return s.n.SealRecordAfter("oauth", key, body, &s.marks)
}

func (s *NATSSeal) Open(key string, value []byte) ([]byte, error) {
	return s.n.OpenRecord("oauth", key, value, &s.marks)
}

// oauthBus carries the OAuth relay's messages sealed by the fleet.
type oauthBus struct{ n *cluster.Node }

func (b oauthBus) Subscribe(subject string, fn func([]byte, func([]byte) error)) (func(), error) {
	sub, err := b.n.Subscribe(subject, "a forwarded authorization redirect", func(m *cluster.Msg) { fn(m.Data, m.Respond) })
	if err != nil {
		return nil, err
	}
	return func() { _ = sub.Unsubscribe() }, nil
}

func (b oauthBus) Request(ctx context.Context, subject string, body []byte) ([]byte, error) {
	return b.n.Request(ctx, subject, body)
}

func (b oauthBus) Flush(timeout time.Duration) error { return b.n.Conn().FlushTimeout(timeout) }

func (b oauthBus) Connected() bool { return b.n.Connected() }

// openOAuthBucket creates (or opens) the token bucket: file storage, so
// tokens outlive a NATS restart, replicated on a NATS cluster.
func openOAuthBucket(ctx context.Context, node *cluster.Node) (jetstream.KeyValue, error) {
	if !node.Connected() {
		return nil, cluster.ErrUnavailable
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	kvc := jetstream.KeyValueConfig{Bucket: node.Bucket("oauth"), History: 1,
		Storage: jetstream.FileStorage, Replicas: 3, MaxValueSize: 64 << 10}
	kv, err := node.JetStream().CreateOrUpdateKeyValue(ctx, kvc)
	if err != nil {
		kvc.Replicas = 1
		kv, err = node.JetStream().CreateOrUpdateKeyValue(ctx, kvc)
	}
	if err != nil {
		return nil, fmt.Errorf("opening bucket %q: %w", kvc.Bucket, err)
	}
	return kv, nil
}
