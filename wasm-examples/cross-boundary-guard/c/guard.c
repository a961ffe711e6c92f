/* cross-boundary-guard in C: the SEP-2624 validator
 * security/cross-boundary-guard of the Go module (../main.go and
 * wasm-examples/internal/secretflow) on the C kit: a secret a server
 * returned in a session may not be sent to a different server later in
 * that session. Its memory of a session is the host's session state
 * (sessionState) where the host keeps one, else the instance's. Same
 * limits: 4096 sessions in an instance (the oldest is forgotten), 1024
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

/* decide answers inv from session s's memory, updating it. */
static void decide(session *s, const edge_invocation *inv, edge_buf *out) {
  walk w = {.s = s, .why = &why};
  why.len = 0;
  if (edge_str_is(inv->phase, "response")) {
    w.origin = inv->server.s ? inv->server.s : s->in_flight.data;
    w.on = inv->server.s ? inv->server.n : s->in_flight.len;
    if (sf_strings(inv->payload.s, inv->payload.n, ingest_string, &w) < 0)
      edge_refuse(out, "cross-boundary-guard: payload is not valid JSON");
    return;
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
    return;
  }
  if (why.len) {
    edge_append(&why, "", 1); /* NUL for edge_refuse */
    edge_refuse(out, why.data);
    return;
  }
  s->in_flight.len = 0;
  edge_append(&s->in_flight, server.data, server.len);
}

/* The session state the host keeps (sessionState), as the Go build's
 * secretflow.Guard.Export: a JSON array of strings, the server in flight
 * first, then "value format server" per secret, at most MAX_STATE bytes.
 * With it the guard's memory of a session survives a recycled instance
 * and follows the session to every replica of a fleet; held is the
 * session being answered, restored from the state. */
enum { MAX_STATE = 60 << 10 };

static session held;
static edge_buf state;
static int state_first;

static int restore_string(void *ctx, const char *s, size_t n, size_t start, size_t end) {
  (void)ctx, (void)start, (void)end;
  if (state_first) {
    state_first = 0;
    edge_append(&held.in_flight, s, n);
    return 0;
  }
  const char *sp1 = memchr(s, ' ', n);
  const char *sp2 = sp1 ? memchr(sp1 + 1, ' ', n - (size_t)(sp1 + 1 - s)) : NULL;
  if (!sp2 || held.nt >= MAX_TAINT_PER_SESSION) return 0;
  int format = -1;
  for (int i = 0; i < SF_FORMATS; i++) {
    size_t fn = (size_t)(sp2 - sp1 - 1);
    if (strlen(sf_format_ids[i]) == fn && memcmp(sf_format_ids[i], sp1 + 1, fn) == 0) format = i;
  }
  if (format < 0) return 0;
  if (held.nt == held.capt) {
    held.capt = held.capt ? 2 * held.capt : 8;
    held.taint = realloc(held.taint, held.capt * sizeof *held.taint);
    if (!held.taint) __builtin_trap();
  }
  size_t vn = (size_t)(sp1 - s), sn = n - (size_t)(sp2 + 1 - s);
  held.taint[held.nt++] = (taint){dup(s, vn), dup(sp2 + 1, sn), vn, sn, format};
  return 0;
}

/* restore makes held the session of the state st; 0 when st is not JSON. */
static session *restore(edge_str st) {
  for (size_t i = 0; i < held.nt; i++) {
    free(held.taint[i].value);
    free(held.taint[i].server);
  }
  held.nt = 0;
  held.in_flight.len = 0;
  state_first = 1;
  return sf_strings(st.s, st.n, restore_string, NULL) < 0 ? NULL : &held;
}

static void append_state_string(edge_buf *b, const char *s, size_t n) {
  edge_append(b, "\"", 1);
  edge_append_escaped(b, s, n);
  edge_append(b, "\"", 1);
}

/* export writes held as a session state into state. */
static void export(void) {
  state.len = 0;
  edge_append(&state, "[", 1);
  append_state_string(&state, held.in_flight.data, held.in_flight.len);
  for (size_t i = 0; i < held.nt; i++) {
    taint *t = &held.taint[i];
    const char *f = sf_format_ids[t->format];
    if (state.len + t->vn + strlen(f) + t->sn + 8 > MAX_STATE) break;
    edge_appends(&state, ",\"");
    edge_append_escaped(&state, t->value, t->vn);
    edge_append(&state, " ", 1);
    edge_appends(&state, f);
    edge_append(&state, " ", 1);
    edge_append_escaped(&state, t->server, t->sn);
    edge_append(&state, "\"", 1);
  }
  edge_append(&state, "]", 1);
}

static const char *validate(const edge_invocation *inv, edge_buf *out) {
  if (!inv->state.s) { /* the host keeps no state: the instance does */
    decide(get_session(inv->session_id), inv, out);
    return NULL;
  }
  session *s = restore(inv->state);
  if (!s) {
    edge_refuse(out, "cross-boundary-guard: session state is not valid JSON");
    return NULL;
  }
  decide(s, inv, out);
  export();
  if (state.len != inv->state.n || memcmp(state.data, inv->state.s, state.len) != 0) edge_set_state(state.data, state.len);
  return NULL;
}

static const char *const events[] = {"tools/call", "resources/read", "prompts/get", "sampling/createMessage",
                                     "elicitation/create", NULL};

static const edge_interceptor interceptors[] = {{
    .name = "security/cross-boundary-guard",
    .description = "Refuses a request that carries a secret read from another server in the same session",
    .events = events,
    .phase = "both",
    .session_state = 1,
    .fn = validate,
}};

EDGE_INTERCEPTORS(interceptors)
