/* See secretflow.h. */
#include "secretflow.h"

#include <string.h>

static int alnum(unsigned char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'); }
static int upper_digit(unsigned char c) { return (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'); }
static int alnum_dash(unsigned char c) { return alnum(c) || c == '-'; }

static const struct {
  const char *prefix;
  size_t min, max;
  int (*set)(unsigned char);
} formats[SF_FORMATS] = {
    {"sk_live_", 16, 0, alnum}, {"pk_live_", 16, 0, alnum},      {"ghp_", 20, 0, alnum},
    {"gho_", 20, 0, alnum},     {"AKIA", 16, 16, upper_digit},  {"xoxb-", 10, 0, alnum_dash},
    {"xoxr-", 10, 0, alnum_dash},
};

const char *const sf_format_ids[SF_FORMATS] = {"stripe_secret_live", "stripe_pub_live", "github_pat", "github_oauth",
                                               "aws_access_key",     "slack_bot",       "slack_refresh"};

/* match returns the length of the token of format f at s[i:], or 0. */
static size_t match(int f, const char *s, size_t n, size_t i) {
  size_t pn = strlen(formats[f].prefix);
  if (n - i < pn || memcmp(s + i, formats[f].prefix, pn) != 0) return 0;
  size_t j = i + pn, k = j;
  while (k < n && formats[f].set((unsigned char)s[k]) && (formats[f].max == 0 || k - j < formats[f].max)) k++;
  return k - j < formats[f].min ? 0 : k - i;
}

void sf_find(const char *s, size_t n, int (*fn)(void *ctx, sf_hit h), void *ctx) {
  for (size_t i = 0; i < n; i++) {
    switch (s[i]) {
    case 's': case 'p': case 'g': case 'A': case 'x': break;
    default: continue;
    }
    for (int f = 0; f < SF_FORMATS; f++) {
      size_t m = match(f, s, n, i);
      if (m) {
        if (fn(ctx, (sf_hit){f, i, m})) return;
        i += m - 1;
        break;
      }
    }
  }
}

static int hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

static long hex4(const char *s, size_t n, size_t i) {
  if (n - i < 4) return -1;
  long v = 0;
  for (size_t k = 0; k < 4; k++) {
    int h = hexval(s[i + k]);
    if (h < 0) return -1;
    v = v << 4 | h;
  }
  return v;
}

static void put_utf8(edge_buf *b, unsigned long r) {
  char u[4];
  size_t l;
  if (r < 0x80) u[0] = (char)r, l = 1;
  else if (r < 0x800) u[0] = (char)(0xC0 | r >> 6), u[1] = (char)(0x80 | (r & 63)), l = 2;
  else if (r < 0x10000) u[0] = (char)(0xE0 | r >> 12), u[1] = (char)(0x80 | (r >> 6 & 63)), u[2] = (char)(0x80 | (r & 63)), l = 3;
  else u[0] = (char)(0xF0 | r >> 18), u[1] = (char)(0x80 | (r >> 12 & 63)), u[2] = (char)(0x80 | (r >> 6 & 63)), u[3] = (char)(0x80 | (r & 63)), l = 4;
  edge_append(b, u, l);
}

void sf_unquote(edge_buf *out, const char *s, size_t n) {
  out->len = 0;
  for (size_t i = 0; i < n; i++) {
    if (s[i] != '\\' || i + 1 >= n) {
      edge_append(out, s + i, 1);
      continue;
    }
    char c = s[++i], e = c;
    switch (c) {
    case 'b': e = '\b'; break;
    case 'f': e = '\f'; break;
    case 'n': e = '\n'; break;
    case 'r': e = '\r'; break;
    case 't': e = '\t'; break;
    case 'u': {
      long r = hex4(s, n, i + 1);
      if (r < 0) break;
      i += 4;
      if (r >= 0xD800 && r < 0xDC00 && n - i > 6 && s[i + 1] == '\\' && s[i + 2] == 'u') {
        long lo = hex4(s, n, i + 3);
        if (lo >= 0xDC00 && lo < 0xE000) {
          r = 0x10000 + ((r - 0xD800) << 10 | (lo - 0xDC00));
          i += 6;
        }
      }
      if (r >= 0xD800 && r < 0xE000) r = 0xFFFD;
      put_utf8(out, (unsigned long)r);
      continue;
    }
    }
    edge_append(out, &e, 1);
  }
}

static size_t skip_ws(const char *s, size_t n, size_t i) {
  while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r' || s[i] == '\n')) i++;
  return i;
}

static edge_buf decoded;

int sf_strings(const char *doc, size_t n,
               int (*fn)(void *ctx, const char *s, size_t sn, size_t start, size_t end), void *ctx) {
  size_t e = edge_skip(doc, n, 0);
  if (!e || skip_ws(doc, n, e) != n) return -1;
  for (size_t i = 0; i < e; i++) {
    if (doc[i] != '"') continue;
    size_t start = i, end = edge_skip(doc, n, i), esc = 0;
    for (size_t k = start + 1; k + 1 < end; k++) {
      if (doc[k] == '\\') esc = 1;
    }
    i = end - 1;
    size_t next = skip_ws(doc, n, end);
    if (next < n && doc[next] == ':') continue; /* a key */
    const char *s = doc + start + 1;
    size_t sn = end - start - 2;
    if (esc) {
      sf_unquote(&decoded, s, sn);
      s = decoded.data;
      sn = decoded.len;
    }
    int r = fn(ctx, s, sn, start, end);
    if (r) return r;
  }
  return 0;
}

static const char *const tool_servers[][2] = {
    {"read_file", "filesystem"}, {"read_text_file", "filesystem"}, {"write_file", "filesystem"},
    {"edit_file", "filesystem"}, {"move_file", "filesystem"},      {"list_directory", "filesystem"},
    {"search_files", "filesystem"}, {"read_query", "sqlite"},      {"write_query", "sqlite"},
    {"create_table", "sqlite"},  {"list_tables", "sqlite"},        {"describe_table", "sqlite"},
    {"git_log", "git"},          {"git_show", "git"},              {"git_diff", "git"},
    {"git_diff_unstaged", "git"}, {"git_commit", "git"},           {"read_graph", "memory"},
    {"create_entities", "memory"}, {"add_observations", "memory"}, {"fetch", "fetch"},
    {"browser_type", "browser"}, {"browser_fill_form", "browser"}, {"browser_snapshot", "browser"},
    {"browser_navigate", "browser"}, {"execute_command", "shell"},
};

/* member_string decodes the string member key of obj into out; 0 when
 * there is none. */
static int member_string(edge_buf *out, edge_str obj, const char *key) {
  size_t vn;
  const char *v = edge_member(obj.s, obj.n, key, &vn);
  if (!v || vn < 2 || v[0] != '"') return 0;
  sf_unquote(out, v + 1, vn - 2);
  return 1;
}

void sf_server_of(edge_buf *out, edge_str event, edge_str payload) {
  size_t pn;
  const char *p = edge_member(payload.s, payload.n, "params", &pn);
  if (p) payload = (edge_str){p, pn};
  if (member_string(out, payload, "name") && out->len > 0) {
    for (size_t i = 0; i < sizeof tool_servers / sizeof tool_servers[0]; i++) {
      if (strlen(tool_servers[i][0]) == out->len && memcmp(out->data, tool_servers[i][0], out->len) == 0) {
        out->len = 0;
        edge_appends(out, tool_servers[i][1]);
        return;
      }
    }
    return;
  }
  if (member_string(out, payload, "uri")) {
    char *colon = memchr(out->data, ':', out->len);
    if (colon) {
      size_t scheme = (size_t)(colon - out->data), rest = scheme + 1;
      if (out->len - rest >= 2 && out->data[rest] == '/' && out->data[rest + 1] == '/') {
        size_t h = rest + 2, e = h;
        while (e < out->len && out->data[e] != '/') e++;
        if (e > h) {
          memmove(out->data, out->data + h, e - h);
          out->len = e - h;
          return;
        }
      }
      out->len = scheme;
      return;
    }
  }
  out->len = 0;
  size_t ns = 0;
  while (ns < event.n && event.s[ns] != '/') ns++;
  if (ns == 0) edge_appends(out, "unknown");
  else edge_append(out, event.s, ns);
}
