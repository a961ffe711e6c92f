/* cross-boundary-guard in C: the SEP-2624 validator
 * security/cross-boundary-guard of the Go module (../main.go and
 * wasm-examples/internal/secretflow) on the C kit: a secret a server
 * returned in a session may not be sent to a different server later in
 * that session. Same limits: 4096 sessions (the oldest is forgotten), 1024
 * secrets per session. */
#include <stdlib.h>
#include <string.h>

#include "../../internal/secretflow/c/secretflow.h"
#include "edge.h"

enum { MAX_SESSIONS = 4096, MAX_TAINT_PER_SESSION = 1024 };

typedef struct {
  char *value, *server;
  size_t vn, sn;
  int format;
} taint;

typedef struct {
  char *id;
  size_t idn;
  edge_buf in_flight; /* the server of the session's last request */
  taint *taint;
  size_t nt, capt;
} session;

static session *sessions[MAX_SESSIONS]; /* by first use, for eviction */
static size_t nsessions;

static char *dup(const char *s, size_t n) {
  char *d = malloc(n ? n : 1);
  if (!d) __builtin_trap();
  memcpy(d, s, n);
  return d;
}

static void drop(session *s) {
  for (size_t i = 0; i < s->nt; i++) {
    free(s->taint[i].value);
    free(s->taint[i].server);
  }
  free(s->taint);
  free(s->in_flight.data);
  free(s->id);
  free(s);
}

static session *get_session(edge_str id) {
  if (!id.s || id.n == 0) id = (edge_str){"default", 7};
  for (size_t i = nsessions; i-- > 0;) {
    if (sessions[i]->idn == id.n && memcmp(sessions[i]->id, id.s, id.n) == 0) return sessions[i];
  }
  if (nsessions == MAX_SESSIONS) {
    drop(sessions[0]);
    memmove(sessions, sessions + 1, (MAX_SESSIONS - 1) * sizeof sessions[0]);
    nsessions--;
  }
  session *s = calloc(1, sizeof *s);
  if (!s) __builtin_trap();
  s->id = dup(id.s, id.n);
  s->idn = id.n;
  sessions[nsessions++] = s;
  return s;
}

static taint *find_taint(session *s, const char *v, size_t n) {
  for (size_t i = 0; i < s->nt; i++) {
    if (s->taint[i].vn == n && memcmp(s->taint[i].value, v, n) == 0) return &s->taint[i];
  }
  return NULL;
}

typedef struct {
  session *s;
  const char *target; /* Check: the request's server */
  size_t tn;
  const char *origin; /* Ingest: the response's server */
  size_t on;
  edge_buf *why;
} walk;

static const char *cur; /* the string sf_find is scanning */

static int check_hit(void *ctx, sf_hit h) {
  walk *w = ctx;
  taint *t = find_taint(w->s, cur + h.off, h.len);
  if (!t || (t->sn == w->tn && memcmp(t->server, w->target, w->tn) == 0)) return 0;
  edge_appends(w->why, "cross-boundary secret flow: a ");
  edge_appends(w->why, sf_format_ids[t->format]);
  edge_appends(w->why, " read from server '");
  edge_append(w->why, t->server, t->sn);
  edge_appends(w->why, "' may not be sent to server '");
  edge_append(w->why, w->target, w->tn);
  edge_appends(w->why, "'");
  return 1;
}

static int ingest_hit(void *ctx, sf_hit h) {
  walk *w = ctx;
  session *s = w->s;
  if (s->nt >= MAX_TAINT_PER_SESSION || find_taint(s, cur + h.off, h.len)) return 0;
  if (s->nt == s->capt) {
    s->capt = s->capt ? 2 * s->capt : 8;
    s->taint = realloc(s->taint, s->capt * sizeof *s->taint);
    if (!s->taint) __builtin_trap();
  }
  s->taint[s->nt++] = (taint){dup(cur + h.off, h.len), dup(w->origin, w->on), h.len, w->on, h.format};
  return 0;
}

static int check_string(void *ctx, const char *s, size_t n, size_t start, size_t end) {
  (void)start, (void)end;
  cur = s;
  walk *w = ctx;
  sf_find(s, n, check_hit, w);
  return w->why->len > 0;
}

static int ingest_string(void *ctx, const char *s, size_t n, size_t start, size_t end) {
  (void)start, (void)end;
  cur = s;
  sf_find(s, n, ingest_hit, ctx);
  return 0;
}

static edge_buf why, server;

static const char *validate(const edge_invocation *inv, edge_buf *out) {
  walk w = {.s = get_session(inv->session_id), .why = &why};
  why.len = 0;
  if (edge_str_is(inv->phase, "response")) {
    w.origin = inv->server.s ? inv->server.s : w.s->in_flight.data;
    w.on = inv->server.s ? inv->server.n : w.s->in_flight.len;
    if (sf_strings(inv->payload.s, inv->payload.n, ingest_string, &w) < 0)
      edge_refuse(out, "cross-boundary-guard: payload is not valid JSON");
    return NULL;
  }
  if (inv->server.s && inv->server.n) {
    server.len = 0;
    edge_append(&server, inv->server.s, inv->server.n);
  } else {
    sf_server_of(&server, inv->event, inv->payload);
  }
  w.target = server.data;
  w.tn = server.len;
  int r = sf_strings(inv->payload.s, inv->payload.n, check_string, &w);
  if (r < 0) {
    edge_refuse(out, "cross-boundary-guard: payload is not valid JSON");
    return NULL;
  }
  if (why.len) {
    edge_append(&why, "", 1); /* NUL for edge_refuse */
    edge_refuse(out, why.data);
    return NULL;
  }
  w.s->in_flight.len = 0;
  edge_append(&w.s->in_flight, server.data, server.len);
  return NULL;
}

static const char *const events[] = {"tools/call", "resources/read", "prompts/get", "sampling/createMessage",
                                     "elicitation/create", NULL};

static const edge_interceptor interceptors[] = {{
    .name = "security/cross-boundary-guard",
    .description = "Refuses a request that carries a secret read from another server in the same session",
    .events = events,
    .phase = "both",
    .fn = validate,
}};

EDGE_INTERCEPTORS(interceptors)
