/* The edge-mcp policy kit for C; see edge.h. */
#include "edge.h"

#include <stdlib.h>
#include <string.h>

static char *input;
static size_t input_cap;
static edge_buf output;

__attribute__((export_name("edge_abi_version"))) int32_t edge_abi_version(void) { return EDGE_ABI_VERSION; }

/* A region of at least size bytes for the host's input, the host's until
 * the next call. */
__attribute__((export_name("edge_alloc"))) int32_t edge_alloc(int32_t size) {
  if (size < 0) size = 0;
  if ((size_t)size > input_cap) {
    free(input);
    input = malloc((size_t)size);
    if (!input) __builtin_trap();
    input_cap = (size_t)size;
  }
  return (int32_t)(uintptr_t)input;
}

int64_t edge_run(int32_t ptr, int32_t len, edge_handler h) {
  output.len = 0;
  const char *err = h((const char *)(uintptr_t)ptr, len < 0 ? 0 : (size_t)len, &output);
  if (err) {
    output.len = 0;
    edge_appends(&output, "{\"error\":\"");
    edge_append_escaped(&output, err, strlen(err));
    edge_appends(&output, "\"}");
  }
  if (output.len == 0) return 0;
  return (int64_t)((uint64_t)(uintptr_t)output.data << 32 | output.len);
}

static void grow(edge_buf *b, size_t n) {
  if (b->len + n <= b->cap) return;
  size_t cap = b->cap ? b->cap * 2 : 256;
  while (cap < b->len + n) cap *= 2;
  char *d = realloc(b->data, cap);
  if (!d) __builtin_trap();
  b->data = d;
  b->cap = cap;
}

void edge_append(edge_buf *b, const char *s, size_t n) {
  grow(b, n);
  memcpy(b->data + b->len, s, n);
  b->len += n;
}

void edge_appends(edge_buf *b, const char *s) { edge_append(b, s, strlen(s)); }

void edge_append_escaped(edge_buf *b, const char *s, size_t n) {
  static const char hex[] = "0123456789abcdef";
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    char e[6] = {'\\', 0, '0', '0', 0, 0};
    switch (c) {
    case '"': case '\\': e[1] = (char)c; edge_append(b, e, 2); continue;
    case '\n': e[1] = 'n'; edge_append(b, e, 2); continue;
    case '\r': e[1] = 'r'; edge_append(b, e, 2); continue;
    case '\t': e[1] = 't'; edge_append(b, e, 2); continue;
    }
    if (c < 0x20) {
      e[1] = 'u';
      e[4] = hex[c >> 4];
      e[5] = hex[c & 15];
      edge_append(b, e, 6);
      continue;
    }
    grow(b, 1);
    b->data[b->len++] = (char)c;
  }
}

void edge_deny(edge_buf *out, const char *reason) {
  edge_appends(out, "{\"action\":\"deny\",\"reason\":\"");
  edge_append_escaped(out, reason, strlen(reason));
  edge_appends(out, "\"}");
}

void edge_rewrite(edge_buf *out, const char *args, size_t n) {
  edge_appends(out, "{\"action\":\"rewrite\",\"arguments\":");
  edge_append(out, args, n);
  edge_append(out, "}", 1);
}

void edge_route(edge_buf *out, const char *server) {
  edge_appends(out, "{\"action\":\"route\",\"server\":\"");
  edge_append_escaped(out, server, strlen(server));
  edge_appends(out, "\"}");
}

void edge_result(edge_buf *out, const char *result, size_t n) {
  edge_appends(out, "{\"result\":");
  edge_append(out, result, n);
  edge_append(out, "}", 1);
}

static size_t ws(const char *s, size_t n, size_t i) {
  while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r' || s[i] == '\n')) i++;
  return i;
}

size_t edge_skip(const char *s, size_t n, size_t i) {
  i = ws(s, n, i);
  if (i >= n) return 0;
  if (s[i] == '"') {
    for (i++; i < n; i++) {
      if (s[i] == '\\') i++;
      else if (s[i] == '"') return i + 1;
    }
    return 0;
  }
  if (s[i] == '{' || s[i] == '[') {
    size_t depth = 0;
    while (i < n) {
      char c = s[i];
      if (c == '"') {
        i = edge_skip(s, n, i);
        if (!i) return 0;
        continue;
      }
      if (c == '{' || c == '[') depth++;
      else if ((c == '}' || c == ']') && --depth == 0) return i + 1;
      i++;
    }
    return 0;
  }
  size_t start = i;
  while (i < n && s[i] != ',' && s[i] != '}' && s[i] != ']' && s[i] != ' ' && s[i] != '\t' && s[i] != '\r' && s[i] != '\n') i++;
  return i > start ? i : 0;
}

int edge_members(const char *obj, size_t n,
                 int (*f)(void *ctx, const char *key, size_t klen, const char *v, size_t vlen), void *ctx) {
  size_t i = ws(obj, n, 0);
  if (i >= n || obj[i] != '{') return -1;
  i = ws(obj, n, i + 1);
  if (i < n && obj[i] == '}') return 0;
  for (;;) {
    if (i >= n || obj[i] != '"') return -1;
    size_t kend = edge_skip(obj, n, i);
    if (!kend) return -1;
    size_t k = i + 1, klen = kend - 1 - k;
    i = ws(obj, n, kend);
    if (i >= n || obj[i] != ':') return -1;
    size_t vs = ws(obj, n, i + 1), ve = edge_skip(obj, n, vs);
    if (!ve) return -1;
    int r = f(ctx, obj + k, klen, obj + vs, ve - vs);
    if (r) return r;
    i = ws(obj, n, ve);
    if (i < n && obj[i] == ',') i = ws(obj, n, i + 1);
    else if (i < n && obj[i] == '}') return 0;
    else return -1;
  }
}

struct find { const char *key, *v; size_t vlen; };

static int find_member(void *ctx, const char *key, size_t klen, const char *v, size_t vlen) {
  struct find *fd = ctx;
  if (strlen(fd->key) != klen || memcmp(fd->key, key, klen) != 0) return 0;
  fd->v = v;
  fd->vlen = vlen;
  return 1;
}

const char *edge_member(const char *obj, size_t n, const char *key, size_t *vlen) {
  struct find fd = {key, NULL, 0};
  edge_members(obj, n, find_member, &fd);
  if (vlen) *vlen = fd.vlen;
  return fd.v;
}

int edge_elems(const char *v, size_t n, int (*f)(void *ctx, const char *e, size_t elen), void *ctx) {
  size_t i = ws(v, n, 0);
  if (i >= n || v[i] != '[') return -1;
  i = ws(v, n, i + 1);
  if (i < n && v[i] == ']') return 0;
  for (;;) {
    size_t e = edge_skip(v, n, i);
    if (!e) return -1;
    int r = f(ctx, v + i, e - i);
    if (r) return r;
    i = ws(v, n, e);
    if (i < n && v[i] == ',') i = ws(v, n, i + 1);
    else if (i < n && v[i] == ']') return 0;
    else return -1;
  }
}

int edge_is_string(const char *v, size_t n, const char *lit) {
  size_t l = strlen(lit);
  return n == l + 2 && v[0] == '"' && v[n - 1] == '"' && memcmp(v + 1, lit, l) == 0;
}

int edge_glob(const char *pat, size_t pn, const char *name, size_t nn) {
  size_t p = 0, n = 0, star_n = 0;
  long star_p = -1;
  while (n < nn) {
    if (p < pn && pat[p] == '*') {
      star_p = (long)p++;
      star_n = n;
    } else if (p < pn && (pat[p] == '?' || pat[p] == name[n])) {
      p++;
      n++;
    } else if (star_p >= 0) {
      p = (size_t)star_p + 1;
      n = ++star_n;
    } else {
      return 0;
    }
  }
  while (p < pn && pat[p] == '*') p++;
  return p == pn;
}

/* SEP-2624 interceptors (ABI 1.1). */

void edge_refuse(edge_buf *out, const char *message) {
  edge_appends(out, "{\"valid\":false,\"severity\":\"error\",\"messages\":[{\"message\":\"");
  edge_append_escaped(out, message, strlen(message));
  edge_appends(out, "\",\"severity\":\"error\"}]}");
}

void edge_replace(edge_buf *out, const char *payload, size_t n) {
  edge_appends(out, "{\"modified\":true,\"payload\":");
  edge_append(out, payload, n);
  edge_append(out, "}", 1);
}

static edge_buf state_update; /* edge_set_state's, for this call */
static int state_set;

void edge_set_state(const char *state, size_t n) {
  state_update.len = 0;
  edge_append(&state_update, state, n);
  state_set = 1;
}

int edge_str_is(edge_str s, const char *lit) {
  return s.s && strlen(lit) == s.n && memcmp(s.s, lit, s.n) == 0;
}

static void append_quoted(edge_buf *b, const char *s) {
  edge_append(b, "\"", 1);
  edge_append_escaped(b, s, strlen(s));
  edge_append(b, "\"", 1);
}

static void append_interceptor(edge_buf *b, const edge_interceptor *ic) {
  edge_appends(b, "{\"name\":");
  append_quoted(b, ic->name);
  if (ic->description) {
    edge_appends(b, ",\"description\":");
    append_quoted(b, ic->description);
  }
  edge_appends(b, ic->mutation ? ",\"type\":\"mutation\"" : ",\"type\":\"validation\"");
  edge_appends(b, ",\"hooks\":[{\"events\":[");
  for (size_t i = 0; ic->events && ic->events[i]; i++) {
    if (i) edge_append(b, ",", 1);
    append_quoted(b, ic->events[i]);
  }
  edge_appends(b, "],\"phase\":");
  append_quoted(b, ic->phase ? ic->phase : "both");
  edge_appends(b, "}]");
  if (ic->mode) {
    edge_appends(b, ",\"mode\":");
    append_quoted(b, ic->mode);
  }
  if (ic->fail_open) edge_appends(b, ",\"failOpen\":true");
  if (ic->session_state) edge_appends(b, ",\"sessionState\":true");
  if (ic->priority) {
    char num[16], *p = num + sizeof num;
    uint32_t v = ic->priority < 0 ? 0u - (uint32_t)ic->priority : (uint32_t)ic->priority;
    do *--p = (char)('0' + v % 10); while (v /= 10);
    if (ic->priority < 0) *--p = '-';
    edge_appends(b, ",\"priorityHint\":");
    edge_append(b, p, (size_t)(num + sizeof num - p));
  }
  if (ic->config_schema) {
    edge_appends(b, ",\"configSchema\":");
    edge_appends(b, ic->config_schema);
  }
  edge_append(b, "}", 1);
}

int64_t edge_list_interceptors(int32_t ptr, int32_t len, const edge_interceptor *ics, size_t n) {
  (void)ptr;
  (void)len;
  output.len = 0;
  edge_appends(&output, "{\"interceptors\":[");
  for (size_t i = 0; i < n; i++) {
    if (i) edge_append(&output, ",", 1);
    append_interceptor(&output, &ics[i]);
  }
  edge_appends(&output, "]}");
  return (int64_t)((uint64_t)(uintptr_t)output.data << 32 | output.len);
}

/* str sets *dst to the contents of the JSON string v; nonzero when v is
 * not a string. */
static int str(edge_str *dst, const char *v, size_t n) {
  if (n < 2 || v[0] != '"') return 1;
  dst->s = v + 1;
  dst->n = n - 2;
  return 0;
}

static int context_member(void *ctx, const char *k, size_t kn, const char *v, size_t vn) {
  edge_invocation *inv = ctx;
#define KEY(s) (kn == sizeof(s) - 1 && memcmp(k, s, kn) == 0)
  if (KEY("sessionId")) return str(&inv->session_id, v, vn);
  if (KEY("server")) return str(&inv->server, v, vn);
  if (KEY("interceptorState")) inv->state = (edge_str){v, vn};
  if (KEY("principal")) {
    size_t idn;
    const char *id = edge_member(v, vn, "id", &idn);
    return id ? str(&inv->principal, id, idn) : 0;
  }
  return 0;
}

static int intercept_member(void *ctx, const char *k, size_t kn, const char *v, size_t vn) {
  edge_invocation *inv = ctx;
  if (KEY("name")) return str(&inv->name, v, vn);
  if (KEY("event")) return str(&inv->event, v, vn);
  if (KEY("phase")) return str(&inv->phase, v, vn);
  if (KEY("config")) inv->config = (edge_str){v, vn};
  else if (KEY("payload")) inv->payload = (edge_str){v, vn};
  else if (KEY("context")) {
    inv->context = (edge_str){v, vn};
    return edge_members(v, vn, context_member, inv) != 0;
  }
  return 0;
#undef KEY
}

/* with_state adds the state update of edge_set_state to the result in
 * out (valid, or unmodified, when the handler left it empty). */
static void with_state(edge_buf *out, int mutation) {
  if (out->len == 0) edge_appends(out, mutation ? "{\"modified\":false}" : "{\"valid\":true}");
  out->len--; /* the result object's closing brace */
  edge_appends(out, ",\"contextUpdates\":{\"interceptorState\":");
  edge_append(out, state_update.data, state_update.len);
  edge_appends(out, "}}");
}

static const edge_interceptor *intercept_ics;
static size_t intercept_n;
static const char *no_interceptor = "intercept: no interceptor of that name";

static const char *intercept(const char *in, size_t n, edge_buf *out) {
  edge_invocation inv = {0};
  if (edge_members(in, n, intercept_member, &inv) != 0) return "intercept: input is not a valid invocation";
  if (!inv.name.s || !inv.payload.s) return "intercept: name and payload are required";
  for (size_t i = 0; i < intercept_n; i++) {
    if (!edge_str_is(inv.name, intercept_ics[i].name)) continue;
    state_set = 0;
    const char *err = intercept_ics[i].fn(&inv, out);
    if (!err && state_set) with_state(out, intercept_ics[i].mutation);
    return err;
  }
  return no_interceptor;
}

int64_t edge_run_intercept(int32_t ptr, int32_t len, const edge_interceptor *ics, size_t n) {
  intercept_ics = ics;
  intercept_n = n;
  return edge_run(ptr, len, intercept);
}
