/* A module on the C kit's ABI 1.1 glue, for TestKitInterceptors: a
 * validator refusing delete_repo (and failing on boom), and a mutator
 * answering what it was told (server, principal, session, config). */
#include "edge.h"

static const char *no_delete(const edge_invocation *inv, edge_buf *out) {
  size_t n;
  const char *name = edge_member(inv->payload.s, inv->payload.n, "name", &n);
  if (name && edge_is_string(name, n, "boom")) return "boom";
  if (name && edge_is_string(name, n, "delete_repo")) edge_refuse(out, "deleting repositories is not allowed");
  return NULL;
}

static const char *echo(const edge_invocation *inv, edge_buf *out) {
  edge_buf p = {0};
  edge_appends(&p, "{\"name\":\"");
  edge_append(&p, inv->server.s, inv->server.n);
  edge_appends(&p, "\",\"arguments\":{\"principal\":\"");
  edge_append(&p, inv->principal.s, inv->principal.n);
  edge_appends(&p, "\",\"session\":\"");
  edge_append(&p, inv->session_id.s, inv->session_id.n);
  edge_appends(&p, "\",\"config\":");
  if (inv->config.s) edge_append(&p, inv->config.s, inv->config.n);
  else edge_appends(&p, "null");
  edge_appends(&p, "}}");
  edge_replace(out, p.data, p.len);
  return NULL;
}

static const char *const call[] = {"tools/call", NULL};
static const char *const all[] = {"tools/*", "resources/read", NULL};

static const edge_interceptor ics[] = {
    {.name = "kit/no-delete", .description = "no \"delete\"", .events = call, .phase = "request", .fn = no_delete},
    {.name = "kit/echo", .mutation = 1, .events = all, .mode = "audit", .fail_open = 1, .priority = -7,
     .config_schema = "{\"type\":\"object\"}", .fn = echo},
};
EDGE_INTERCEPTORS(ics)
