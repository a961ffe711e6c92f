/* redact-secrets in C: the core rules of the Go module
 * (wasm-examples/redact-secrets/redact) on the C kit, passing the same
 * vectors (../vectors.json). Config: replacement, disable, arguments,
 * results; tokens and literals are the Go module's only.
 *
 * It works on the JSON text as it is: matches never cross a quote, escape
 * sequences count as word boundaries, replacements are JSON-escaped. */
#include <string.h>

#include "edge.h"

enum { API_KEY, BEARER, JWT, PRIVATE_KEY, EMAIL, CARD, KINDS };
static const char *const kinds[KINDS] = {"api_key", "bearer", "jwt", "private_key", "email", "card"};

static edge_buf repl[KINDS];
static int disabled[KINDS], no_arguments, no_results, configured;
static edge_buf buf;

/* set_repl builds the replacements from raw JSON string text (escapes kept). */
static void set_repl(const char *r, size_t n) {
  for (int k = 0; k < KINDS; k++) {
    repl[k].len = 0;
    for (size_t i = 0; i < n;) {
      if (n - i >= 6 && memcmp(r + i, "{kind}", 6) == 0) {
        edge_appends(&repl[k], kinds[k]);
        i += 6;
      } else {
        edge_append(&repl[k], r + i++, 1);
      }
    }
  }
  configured = 1;
}

static const char *cfg_err;

static int disable_kind(void *ctx, const char *e, size_t n) {
  (void)ctx;
  for (int k = 0; k < KINDS; k++) {
    if (edge_is_string(e, n, kinds[k])) {
      disabled[k] = 1;
      return 0;
    }
  }
  cfg_err = "config: unknown kind in disable (api_key, bearer, jwt, private_key, email, card)";
  return 1;
}

static int config_member(void *ctx, const char *k, size_t kn, const char *v, size_t vn) {
  (void)ctx;
#define KEY(s) (kn == sizeof(s) - 1 && memcmp(k, s, kn) == 0)
  if (KEY("replacement") && vn >= 2 && v[0] == '"') set_repl(v + 1, vn - 2);
  else if (KEY("disable")) return edge_elems(v, vn, disable_kind, NULL) != 0 ? (cfg_err ? 1 : (cfg_err = "config: disable: want an array", 1)) : 0;
  else if (KEY("arguments")) no_arguments = vn == 5 && memcmp(v, "false", 5) == 0;
  else if (KEY("results")) no_results = vn == 5 && memcmp(v, "false", 5) == 0;
  else {
    cfg_err = "config: unknown key (replacement, disable, arguments, results)";
    return 1;
  }
  return 0;
#undef KEY
}

static const char *configure(const char *in, size_t n, edge_buf *out) {
  (void)out;
  cfg_err = NULL;
  if (edge_members(in, n, config_member, NULL) < 0 && !cfg_err) return "config: not a JSON object";
  return cfg_err;
}

static int redact(edge_buf *dst, const char *s, size_t n);

static void defaults(void) {
  if (!configured) set_repl("[REDACTED]", 10);
}

static const char *on_tool_call(const char *in, size_t n, edge_buf *out) {
  defaults();
  size_t an;
  const char *args = edge_member(in, n, "arguments", &an);
  if (no_arguments || !args) return NULL;
  buf.len = 0;
  if (redact(&buf, args, an)) edge_rewrite(out, buf.data, buf.len);
  return NULL;
}

static const char *on_result(const char *in, size_t n, edge_buf *out) {
  defaults();
  size_t rn;
  const char *r = edge_member(in, n, "result", &rn);
  if (no_results || !r) return NULL;
  edge_appends(out, "{\"result\":");
  if (redact(out, r, rn)) edge_append(out, "}", 1);
  else out->len = 0;
  return NULL;
}

EDGE_HOOK(edge_configure, configure)
EDGE_HOOK(edge_hook_tool_call, on_tool_call)
EDGE_HOOK(edge_hook_tool_result, on_result)
EDGE_HOOK(edge_hook_resource_result, on_result)
EDGE_HOOK(edge_hook_prompt_result, on_result)

/* Character classes, one bit each. */
enum { ALNUM = 1, ALNUM_DASH = 2, B64 = 4, HEX = 8, DOMAIN = 16, TOKEN = 32, UPPER_NUM = 64, EMAIL_LOCAL = 128, NSETS = 8 };
static unsigned short cls[256];

static void init_classes(void) {
  for (int c = 0; c < 256; c++) {
    int alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    unsigned v = 0;
    if (alnum) v |= ALNUM | ALNUM_DASH | B64 | DOMAIN | TOKEN | EMAIL_LOCAL;
    if (c == '_' || c == '-') v |= ALNUM_DASH | B64;
    if (c == '+' || c == '/' || c == '=') v |= B64;
    if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')) v |= HEX;
    if (c == '-' || c == '.') v |= DOMAIN;
    if (c && strchr("_-.~+/=", c)) v |= TOKEN;
    if ((c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) v |= UPPER_NUM;
    if (c && strchr("._%+-", c)) v |= EMAIL_LOCAL;
    cls[c] = (unsigned short)v;
  }
}

#define IS(c, set) (cls[(unsigned char)(c)] & (set))

/* The first two bytes of every pattern: a match can start at p only if
 * need[s[p]] & next[s[p+1]] (sk rk gh gi xo AK AS AI ey be/BE, two digits,
 * two dashes, '@' and a letter or digit). redact skips eight positions at
 * a time where no pair fits. */
enum { NK = 1, NHI = 2, NO = 4, NKSI = 8, NY = 16, NE = 32, NDIGIT = 64, NDASH = 128, NALNUM = 256 };
static unsigned short need[256], next[256];

static void init_pairs(void) {
  need['s'] = need['r'] = NK;
  need['g'] = NHI;
  need['x'] = NO;
  need['A'] = NKSI;
  need['e'] = NY;
  need['B'] = need['b'] = NE;
  for (int c = '2'; c <= '6'; c++) need[c] = NDIGIT;
  need['-'] = NDASH;
  need['@'] = NALNUM;
  next['k'] = NK;
  next['h'] = next['i'] = NHI;
  next['o'] = NO;
  next['K'] = next['S'] = NKSI;
  next['I'] = NKSI;
  next['y'] = NY;
  next['e'] = next['E'] = NE;
  next['-'] = NDASH;
  for (int c = 0; c < 256; c++) {
    if (c >= '0' && c <= '9') next[c] |= NDIGIT;
    if (cls[c] & ALNUM) next[c] |= NALNUM;
  }
}

#define PAIR(i) (need[(unsigned char)s[i]] & next[(unsigned char)s[(i) + 1]])

/* Memoised runs per character set: linear time on long runs. */
typedef struct { size_t from[NSETS], end[NSETS]; } runs;

static size_t run(runs *m, const char *s, size_t n, size_t i, unsigned set) {
  int id = __builtin_ctz(set);
  if (m->end[id] && i >= m->from[id] && i <= m->end[id]) return m->end[id];
  size_t e = i;
  while (e < n && IS(s[e], set)) e++;
  m->from[id] = i;
  m->end[id] = e;
  return e;
}

static size_t tail(runs *m, const char *s, size_t n, size_t i, size_t min, unsigned set) {
  size_t e = run(m, s, n, i, set);
  return e >= i + min ? e : 0;
}

#define AT(i, c) ((i) < n && s[i] == (c))
#define HAS(i, lit) (n - (i) >= sizeof(lit) - 1 && memcmp(s + (i), lit, sizeof(lit) - 1) == 0)

static int escaped(const char *s, size_t p) {
  size_t k = 0;
  while (p > k && s[p - k - 1] == '\\' && k < 64) k++;
  return k % 2;
}

static int word_start(const char *s, size_t p) {
  if (p == 0) return 1;
  char c = s[p - 1];
  if (c == '\\') return 0;
  if (!IS(c, ALNUM) && c != '_') return 1;
  if (p >= 2 && s[p - 2] == '\\' && (c == 'n' || c == 't' || c == 'r' || c == 'b' || c == 'f')) return 1;
  return p >= 6 && s[p - 6] == '\\' && s[p - 5] == 'u' && IS(s[p - 4], HEX) && IS(s[p - 3], HEX) && IS(s[p - 2], HEX) && IS(c, HEX);
}

static int boundary_at(const char *s, size_t n, size_t i) { return i >= n || (!IS(s[i], ALNUM) && s[i] != '_'); }

static size_t api_key(const char *s, size_t n, size_t i, runs *m) {
  char c = s[i];
  if ((c == 's' || c == 'r') && AT(i + 1, 'k')) {
    if (c == 's' && AT(i + 2, '-')) return tail(m, s, n, i + 3, 20, ALNUM_DASH);
    if (AT(i + 2, '_') && (HAS(i + 3, "live_") || HAS(i + 3, "test_"))) return tail(m, s, n, i + 8, 16, ALNUM);
  } else if (c == 'g') {
    if (AT(i + 1, 'h') && AT(i + 3, '_') && strchr("pousr", s[i + 2]) && s[i + 2]) {
      size_t e = run(m, s, n, i + 4, ALNUM);
      if (e >= i + 34 && boundary_at(s, n, e)) return e;
    }
    if (HAS(i, "github_pat_")) return tail(m, s, n, i + 11, 22, ALNUM_DASH);
  } else if (c == 'x') {
    if (AT(i + 1, 'o') && AT(i + 2, 'x') && AT(i + 4, '-') && strchr("bpars", s[i + 3]) && s[i + 3]) return tail(m, s, n, i + 5, 10, ALNUM_DASH);
  } else if (c == 'A' && i + 4 <= n) {
    if ((s[i + 1] == 'K' || s[i + 1] == 'S') && s[i + 2] == 'I' && s[i + 3] == 'A') {
      size_t e = run(m, s, n, i + 4, UPPER_NUM);
      if (e == i + 20 && boundary_at(s, n, e)) return e;
    }
    if (HAS(i + 1, "Iza")) return tail(m, s, n, i + 4, 35, ALNUM_DASH);
  }
  return 0;
}

static size_t jwt(const char *s, size_t n, size_t i, runs *m) {
  if (!AT(i + 1, 'y') || !AT(i + 2, 'J')) return 0;
  size_t e = run(m, s, n, i + 3, ALNUM_DASH);
  if (e - i < 10 || !AT(e, '.')) return 0;
  size_t p = run(m, s, n, e + 1, ALNUM_DASH);
  if (p - (e + 1) < 10) return 0;
  if (AT(p, '.')) p = run(m, s, n, p + 1, ALNUM_DASH);
  return p;
}

static size_t bearer(const char *s, size_t n, size_t i, runs *m, size_t *start) {
  static const char word[] = "bearer";
  if (i + 7 > n || (s[i + 6] != ' ' && s[i + 6] != '\t')) return 0;
  for (int k = 0; k < 6; k++)
    if ((s[i + k] | 0x20) != word[k]) return 0;
  size_t j = i + 6;
  while (j < n && j - i < 14 && (s[j] == ' ' || s[j] == '\t')) j++;
  size_t e = run(m, s, n, j, TOKEN);
  if (e - j < 16) return 0;
  *start = j;
  return e;
}

static size_t pem_block(const char *s, size_t n, size_t i) {
  if (!HAS(i, "-----BEGIN ")) return 0;
  size_t j = i + 11, k = j;
  while (k < n && k - j < 40 && ((s[k] >= 'A' && s[k] <= 'Z') || s[k] == ' ')) k++;
  if (k - j < 11 || memcmp(s + k - 11, "PRIVATE KEY", 11) != 0 || !HAS(k, "-----")) return 0;
  for (size_t e = k + 5; e < n; e++) {
    if (s[e] == '\\') e++;
    else if (s[e] == '"') return e;
    else if (s[e] == '-' && HAS(e, "-----END ")) {
      e += 9;
      while (e < n && ((s[e] >= 'A' && s[e] <= 'Z') || s[e] == ' ')) e++;
      if (HAS(e, "-----")) e += 5;
      return e;
    }
  }
  return n;
}

static size_t email(const char *s, size_t n, size_t at, size_t floor, runs *m, size_t *startp) {
  size_t start = at;
  while (start > floor && IS(s[start - 1], EMAIL_LOCAL) && at - start < 64) start--;
  while (start < at && escaped(s, start)) start += s[start] == 'u' ? 5 : 1;
  while (start < at && (s[start] == '.' || s[start] == '-')) start++;
  if (start >= at) return 0;
  size_t end = run(m, s, n, at + 1, DOMAIN);
  while (end > at + 1 && (s[end - 1] == '.' || s[end - 1] == '-')) end--;
  if (end == at + 1 || s[at + 1] == '.' || s[at + 1] == '-') return 0;
  size_t dot = 0;
  for (size_t k = at + 1; k < end; k++) {
    if (s[k] == '.') {
      if (s[k - 1] == '.') return 0;
      dot = k;
    }
  }
  if (!dot || end - dot - 1 < 2) return 0;
  for (size_t k = dot + 1; k < end; k++)
    if (!((s[k] >= 'a' && s[k] <= 'z') || (s[k] >= 'A' && s[k] <= 'Z'))) return 0;
  *startp = start;
  return end;
}

static size_t card(const char *s, size_t n, size_t i) {
  unsigned char digits[19];
  size_t nd = 0, group = 0, j = i;
  char sep = 0;
  while (j < n) {
    char c = s[j];
    if (c >= '0' && c <= '9') {
      if (nd == sizeof digits) return 0;
      digits[nd++] = (unsigned char)(c - '0');
      group++;
      j++;
      continue;
    }
    if ((c == ' ' || c == '-') && group >= 3 && j + 1 < n && s[j + 1] >= '0' && s[j + 1] <= '9' && (!sep || sep == c)) {
      sep = c;
      group = 0;
      j++;
      continue;
    }
    break;
  }
  if (nd < 13 || group < 3 || !boundary_at(s, n, j) || digits[0] < 2 || digits[0] > 6) return 0;
  unsigned sum = 0;
  for (size_t k = 0; k < nd; k++) {
    unsigned d = digits[nd - 1 - k];
    if (k % 2) {
      d *= 2;
      if (d > 9) d -= 9;
    }
    sum += d;
  }
  return sum % 10 == 0 ? j : 0;
}

/* match_at tries every pattern at s[p]; returns the match's end (0: none). */
static size_t match_at(const char *s, size_t n, size_t p, size_t last, runs *m, size_t *start, int *kind) {
  char c = s[p];
  size_t e = 0;
  *start = p;
  if (p > 0 && escaped(s, p)) return 0;
  if (c == '@') {
    *kind = EMAIL;
    return disabled[EMAIL] ? 0 : email(s, n, p, last, m, start);
  }
  if (!word_start(s, p)) return 0;
  if (c >= '2' && c <= '6') {
    *kind = CARD;
    if (!disabled[CARD]) e = card(s, n, p);
  } else if (c == '-') {
    *kind = PRIVATE_KEY;
    if (!disabled[PRIVATE_KEY]) e = pem_block(s, n, p);
  } else if (c == 'e') {
    *kind = JWT;
    if (!disabled[JWT]) e = jwt(s, n, p, m);
  } else if (c == 'B' || c == 'b') {
    *kind = BEARER;
    if (!disabled[BEARER]) e = bearer(s, n, p, m, start);
  } else {
    *kind = API_KEY;
    if (!disabled[API_KEY]) e = api_key(s, n, p, m);
  }
  return e;
}

/* redact appends s with every secret masked to dst; 0 (and nothing
 * appended) when there was none. */
static int redact(edge_buf *dst, const char *s, size_t n) {
  if (!cls['s']) {
    init_classes();
    init_pairs();
  }
  runs m = {{0}, {0}};
  size_t last = 0, p = 0, mark = dst->len;
  int changed = 0;
  while (p < n) {
    size_t stop = n - 1; /* positions [p, stop) are looked at one by one */
    if (p + 9 <= n) {
      if (!(PAIR(p) | PAIR(p + 1) | PAIR(p + 2) | PAIR(p + 3) | PAIR(p + 4) | PAIR(p + 5) | PAIR(p + 6) | PAIR(p + 7))) {
        p += 8;
        continue;
      }
      stop = p + 8;
    }
    for (; p < stop; p++) {
      if (!PAIR(p)) continue;
      size_t start;
      int kind;
      size_t end = match_at(s, n, p, last, &m, &start, &kind);
      if (end) {
        edge_append(dst, s + last, start - last);
        edge_append(dst, repl[kind].data, repl[kind].len);
        last = end;
        p = end;
        changed = 1;
        break;
      }
    }
    if (stop == n - 1 && p >= stop) break;
  }
  if (!changed) {
    dst->len = mark;
    return 0;
  }
  edge_append(dst, s + last, n - last);
  return 1;
}
