/* The edge-mcp policy kit for C: the ABI glue of policy/ABI.md (1.1) and
 * small JSON helpers. One header and one source file (edge.c); built with
 * clang for wasm32-wasi as a reactor against wasi-libc:
 *
 *   clang --target=wasm32-wasi -mexec-model=reactor -O2 -Wl,--strip-all \
 *     -o policy.wasm policy.c edge.c
 *
 * A handler gets the hook input (a JSON object, see ABI.md) and an empty
 * output buffer. Leaving the buffer empty means allow / unchanged;
 * returning a message (not NULL) reports {"error":message}. Export only
 * the hooks you implement, with EDGE_HOOK: the host calls exactly those.
 *
 *   static const char *on_call(const char *in, size_t n, edge_buf *out) {
 *     size_t tn; const char *tool = edge_member(in, n, "tool", &tn);
 *     if (tool && edge_is_string(tool, tn, "delete_repo"))
 *       edge_deny(out, "deleting repositories is not allowed");
 *     return NULL;
 *   }
 *   EDGE_HOOK(edge_hook_tool_call, on_call)
 */
#ifndef EDGE_H
#define EDGE_H

#include <stddef.h>
#include <stdint.h>

#define EDGE_ABI_VERSION 0x00010001

/* A growable byte buffer. */
typedef struct {
  char *data;
  size_t len, cap;
} edge_buf;

typedef const char *(*edge_handler)(const char *in, size_t len, edge_buf *out);

/* Runs h on the input at [ptr, ptr+len) and packs its output (ptr<<32|len). */
int64_t edge_run(int32_t ptr, int32_t len, edge_handler h);

/* Exports h under an ABI name: edge_hook_tools_list, edge_hook_tool_call,
 * edge_hook_tool_result, edge_hook_resource_result, edge_hook_prompt_result,
 * edge_hook_event or edge_configure. */
#define EDGE_HOOK(name, h)                                                  \
  __attribute__((export_name(#name))) int64_t name(int32_t ptr, int32_t len) { \
    return edge_run(ptr, len, h);                                           \
  }

/* Buffers. edge_append and friends abort (trap) when memory runs out. */
void edge_append(edge_buf *b, const char *s, size_t n);
void edge_appends(edge_buf *b, const char *s); /* a C string */
/* Appends s[0:n] escaped for the inside of a JSON string. */
void edge_append_escaped(edge_buf *b, const char *s, size_t n);

/* Decisions and results. */
void edge_deny(edge_buf *out, const char *reason);
void edge_rewrite(edge_buf *out, const char *args, size_t n);
void edge_route(edge_buf *out, const char *server);
void edge_result(edge_buf *out, const char *result, size_t n);

/* JSON, on the text as it is. edge_skip returns the end of the value at
 * s[i] (after white space) or 0 when it is malformed. */
size_t edge_skip(const char *s, size_t n, size_t i);
/* The raw value of a top-level member of an object, or NULL. */
const char *edge_member(const char *obj, size_t n, const char *key, size_t *vlen);
/* Calls f for each member (key: raw text between the quotes) until it
 * returns nonzero; returns -1 when obj is not an object, else what f
 * returned last (0 when it saw every member). */
int edge_members(const char *obj, size_t n,
                 int (*f)(void *ctx, const char *key, size_t klen, const char *v, size_t vlen), void *ctx);
/* Calls f for each element of an array; -1 when v is not one. */
int edge_elems(const char *v, size_t n, int (*f)(void *ctx, const char *e, size_t elen), void *ctx);
/* Whether the JSON value v is the string lit (compared escaped, as is). */
int edge_is_string(const char *v, size_t n, const char *lit);

/* Whether name matches pattern: '*' matches any run of bytes, '?' one byte
 * (the host's attachment globs, guest/glob). */
int edge_glob(const char *pat, size_t pn, const char *name, size_t nn);

/* SEP-2624 interceptors (ABI 1.1). A raw span of the input: for strings
 * the text between the quotes (escapes kept), else the JSON value; s is
 * NULL when the member is absent. */
typedef struct {
  const char *s;
  size_t n;
} edge_str;

/* One call of an interceptor. */
typedef struct {
  edge_str name, event, phase;            /* strings */
  edge_str session_id, server, principal; /* strings from context (principal.id) */
  edge_str context, config, payload;      /* raw JSON */
  edge_str state; /* raw JSON: context.interceptorState, the session state
                   * the host keeps for a session_state interceptor ({} at
                   * first); s is NULL when the host keeps none */
} edge_invocation;

/* An interceptor handler writes its answer to out: for a validator,
 * nothing (valid) or edge_refuse; for a mutator, nothing (unmodified) or
 * edge_replace. Returning a message (not NULL) reports {"error":message}. */
typedef const char *(*edge_intercept_fn)(const edge_invocation *inv, edge_buf *out);

/* An interceptor descriptor (the wire shape of interceptors/list). */
typedef struct {
  const char *name, *description;     /* description may be NULL */
  int mutation;                       /* 0: validation, 1: mutation */
  const char *const *events;          /* NULL-terminated: "tools/call", "*", ... */
  const char *phase;                  /* "request", "response", "both" (NULL: both) */
  const char *mode;                   /* NULL (active) or "audit" */
  int fail_open;
  int32_t priority;                   /* priorityHint, 0 by default */
  const char *config_schema;          /* a JSON Schema object, or NULL */
  int session_state;                  /* 1: the host keeps its state per
                                       * session ("sessionState": true) */
  edge_intercept_fn fn;
} edge_interceptor;

/* Answers. */
void edge_refuse(edge_buf *out, const char *message);
void edge_replace(edge_buf *out, const char *payload, size_t n);
/* edge_set_state makes state[0:n] (a JSON value, at most 64 KiB) the
 * interceptor's session state from this call on (the result's
 * contextUpdates.interceptorState), beside whatever the handler answers;
 * a session_state interceptor that does not call it leaves the state
 * unchanged. */
void edge_set_state(const char *state, size_t n);

/* Whether s (a string span) equals the C string lit. */
int edge_str_is(edge_str s, const char *lit);

int64_t edge_list_interceptors(int32_t ptr, int32_t len, const edge_interceptor *ics, size_t n);
int64_t edge_run_intercept(int32_t ptr, int32_t len, const edge_interceptor *ics, size_t n);

/* Exports edge_hook_interceptors and edge_hook_intercept for an array of
 * edge_interceptor:
 *
 *   static const char *const events[] = {"tools/call", NULL};
 *   static const edge_interceptor ics[] = {
 *     {.name = "acme/no-delete", .events = events, .phase = "request", .fn = no_delete}};
 *   EDGE_INTERCEPTORS(ics)
 */
#define EDGE_INTERCEPTORS(table)                                                            \
  __attribute__((export_name("edge_hook_interceptors"))) int64_t edge_hook_interceptors(    \
      int32_t ptr, int32_t len) {                                                           \
    return edge_list_interceptors(ptr, len, table, sizeof(table) / sizeof(table[0]));       \
  }                                                                                         \
  __attribute__((export_name("edge_hook_intercept"))) int64_t edge_hook_intercept(          \
      int32_t ptr, int32_t len) {                                                           \
    return edge_run_intercept(ptr, len, table, sizeof(table) / sizeof(table[0]));           \
  }

#endif
