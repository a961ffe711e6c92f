package config

import (
	"encoding/json"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// clusterKeys are the keys of the "cluster" section.
var clusterKeys = []key{
	{name: "cluster.nats_url", field: at(func(c *Cluster) *string { return &c.NatsURL }),
		doc: "NATS servers, comma-separated (`nats://host:4222`, `tls://…`) (required)"},
	{name: "cluster.name", def: "`edge`", field: at(func(c *Cluster) *string { return &c.Name }),
		doc: "the fleet's name: prefix of every subject, bucket and stream, so fleets can share a NATS"},
	{name: "cluster.secret", typ: "string or [string]", decode: decodeSecrets,
		doc: "key of the sealed session tokens, the same on every replica (32 characters at least; a list rotates: the first seals, all open) (required)"},
	{name: "cluster.replica", def: "host name + listen port", field: at(func(c *Cluster) *string { return &c.Replica }),
		doc: "this replica's id in the fleet"},
	{name: "cluster.nats_creds", field: at(func(c *Cluster) *string { return &c.NatsCreds }),
		doc: "NATS credentials file (JWT + nkey seed)"},
	{name: "cluster.nats_nkey", field: at(func(c *Cluster) *string { return &c.NatsNkey }),
		doc: "file holding a NATS user nkey seed (`SU…`), for a NATS whose users are nkeys"},
	{name: "cluster.allow_anonymous_nats", def: "false", field: at(func(c *Cluster) *bool { return &c.AllowAnonymousNATS }),
		doc: "join a NATS that accepts clients without credentials: without it a replica refuses to start when a bare connection to `nats_url` gets in (anyone on that NATS could delete the fleet's records and drop its messages, though not read or forge them)"},
	{name: "cluster.nats_tls", field: at(func(c *Cluster) **ClusterTLS { return &c.NatsTLS }),
		doc: "TLS to NATS"},
	{name: "cluster.nats_tls.ca_file", field: at(func(t *ClusterTLS) *string { return &t.CAFile }),
		doc: "CA bundle that verifies the NATS servers"},
	{name: "cluster.nats_tls.cert_file", field: at(func(t *ClusterTLS) *string { return &t.CertFile }),
		doc: "client certificate (with `key_file`)"},
	{name: "cluster.nats_tls.key_file", field: at(func(t *ClusterTLS) *string { return &t.KeyFile }),
		doc: "client key (with `cert_file`)"},
	{name: "cluster.session_ttl", def: "86400", field: at(func(c *Cluster) *time.Duration { return &c.SessionTTL }),
		doc: "how long a session id (sealed token) is valid after `initialize`, the same on every replica: a client still using it then gets 404 and initialises again; at least 60, at most 30 days"},
}

// Bounds of cluster.session_ttl.
const (
	minSessionTTL = time.Minute
	maxSessionTTL = 30 * 24 * time.Hour
)

// minClusterSecret is the shortest secret accepted: the token key is
// derived from it, so it must carry enough entropy.
const minClusterSecret = 32

// decodeSecrets reads cluster.secret: one string or a list of strings.
func decodeSecrets(d *decoder, path string, parent any) *Error {
	c := parent.(*Cluster)
	t, cerr := d.token(path)
	if cerr != nil || t == nil {
		return cerr
	}
	switch t := t.(type) {
	case string:
		s, cerr := d.expand(configString{s: t, path: path, set: true})
		c.Secrets = append(c.Secrets, s)
		return cerr
	case json.Delim:
		if t != '[' {
			break
		}
		for i := 0; d.dec.More(); i++ {
			s, cerr := d.expanded(path + "[" + strconv.Itoa(i) + "]")
			if cerr != nil {
				return cerr
			}
			c.Secrets = append(c.Secrets, s)
		}
		_, cerr = d.token(path)
		return cerr
	}
	return d.fail(path, "must be a string or an array of strings, got %s", configKind(t))
}

// checkCluster checks the cluster section; secrets are never echoed.
func checkCluster(v any) (at, reason string) {
	c := v.(*Cluster)
	if strings.TrimSpace(c.NatsURL) == "" {
		return "nats_url", "is required: the NATS servers the fleet shares"
	}
	for _, u := range strings.Split(c.NatsURL, ",") {
		pu, err := url.Parse(strings.TrimSpace(u))
		if err != nil || pu.Host == "" {
			return "nats_url", "must list URLs such as nats://127.0.0.1:4222, got " + strconv.Quote(strings.TrimSpace(u))
		}
	}
	if c.Name != "" && !subjectToken(c.Name) {
		return "name", "may hold only letters, digits, '-' and '_' (it prefixes NATS subjects and bucket names)"
	}
	if len(c.Secrets) == 0 {
		return "secret", "is required: every replica of the fleet seals and opens session tokens with it"
	}
	for i, s := range c.Secrets {
		if len(s) < minClusterSecret {
			return "secret[" + strconv.Itoa(i) + "]", "must be at least " + strconv.Itoa(minClusterSecret) + " characters (got " + strconv.Itoa(len(s)) + ")"
		}
	}
	if t := c.NatsTLS; t != nil && (t.CertFile == "") != (t.KeyFile == "") {
		return "nats_tls", "cert_file and key_file go together"
	}
	if len(c.Replica) > 128 || strings.ContainsFunc(c.Replica, unicode.IsSpace) {
		return "replica", "must be at most 128 characters without white space"
	}
	if t := c.SessionTTL; t != 0 && (t < minSessionTTL || t > maxSessionTTL) {
		return "session_ttl", "must be between 60 and 2592000 seconds (30 days), got " + strconv.FormatFloat(t.Seconds(), 'f', -1, 64)
	}
	return "", ""
}

// subjectToken reports whether s is usable as one NATS subject token and
// as part of a bucket name.
func subjectToken(s string) bool {
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_':
		default:
			return false
		}
	}
	return s != ""
}
