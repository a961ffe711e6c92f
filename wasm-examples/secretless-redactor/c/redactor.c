/* secretless-redactor in C: the SEP-2624 mutator
 * security/secretless-redactor of the Go module (../main.go) on the C kit:
 * every verbatim secret of a known format (wasm-examples/internal/secretflow)
 * in an outbound request is replaced by [REDACTED:<format>]. */
#include "../../internal/secretflow/c/secretflow.h"
#include "edge.h"

typedef struct {
  const char *doc;
  size_t last;  /* doc[last:] is not copied yet */
  edge_buf *dst; /* the rewritten payload */
  int changed;
} rewrite;

static edge_buf repl;
static const char *cur;
static size_t cur_done;

static int redact_hit(void *ctx, sf_hit h) {
  (void)ctx;
  edge_append_escaped(&repl, cur + cur_done, h.off - cur_done);
  edge_appends(&repl, "[REDACTED:");
  edge_appends(&repl, sf_format_ids[h.format]);
  edge_appends(&repl, "]");
  cur_done = h.off + h.len;
  return 0;
}

static int redact_string(void *ctx, const char *s, size_t n, size_t start, size_t end) {
  rewrite *rw = ctx;
  repl.len = 0;
  cur = s;
  cur_done = 0;
  sf_find(s, n, redact_hit, NULL);
  if (cur_done == 0) return 0; /* no secret */
  edge_append_escaped(&repl, s + cur_done, n - cur_done);
  edge_append(rw->dst, rw->doc + rw->last, start - rw->last);
  edge_append(rw->dst, "\"", 1);
  edge_append(rw->dst, repl.data, repl.len);
  edge_append(rw->dst, "\"", 1);
  rw->last = end;
  rw->changed = 1;
  return 0;
}

static edge_buf payload;

static const char *mutate(const edge_invocation *inv, edge_buf *out) {
  payload.len = 0;
  rewrite rw = {.doc = inv->payload.s, .dst = &payload};
  if (sf_strings(inv->payload.s, inv->payload.n, redact_string, &rw) < 0 || !rw.changed) return NULL;
  edge_append(&payload, rw.doc + rw.last, inv->payload.n - rw.last);
  edge_replace(out, payload.data, payload.len);
  return NULL;
}

static const char *const events[] = {"tools/call", "resources/read", "prompts/get", "sampling/createMessage",
                                     "elicitation/create", NULL};

static const edge_interceptor interceptors[] = {{
    .name = "security/secretless-redactor",
    .description = "Replaces verbatim secrets in outbound requests with [REDACTED:<format>]",
    .mutation = 1,
    .events = events,
    .phase = "request",
    .priority = -50000,
    .fn = mutate,
}};

EDGE_INTERCEPTORS(interceptors)
