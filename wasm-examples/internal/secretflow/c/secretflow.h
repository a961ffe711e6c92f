/* secretflow in C: the secret formats and the JSON string walk of
 * wasm-examples/internal/secretflow, shared by the C builds of
 * cross-boundary-guard and secretless-redactor (on the C kit, guest/kits/c). */
#ifndef SECRETFLOW_H
#define SECRETFLOW_H

#include <stddef.h>

#include "edge.h"

/* The formats, as secretflow.Formats. */
enum { SF_FORMATS = 7 };
extern const char *const sf_format_ids[SF_FORMATS];

/* A secret in a text: its format and where it is. */
typedef struct {
  int format;
  size_t off, len;
} sf_hit;

/* sf_find calls fn for every secret in s[0:n], in order of position, until
 * it returns nonzero. */
void sf_find(const char *s, size_t n, int (*fn)(void *ctx, sf_hit h), void *ctx);

/* sf_strings calls fn with every string value (not object keys) of the
 * JSON document doc, decoded, and the span [start, end) of its token
 * (quotes included) in doc, until fn returns nonzero. It returns -1 when
 * doc is not one JSON value, else what fn returned last. */
int sf_strings(const char *doc, size_t n,
               int (*fn)(void *ctx, const char *s, size_t sn, size_t start, size_t end), void *ctx);

/* sf_unquote decodes the inside of a JSON string into out (reset first). */
void sf_unquote(edge_buf *out, const char *s, size_t n);

/* sf_server_of names the server an event goes to when the host did not
 * say, as secretflow.ServerOf. The answer is in out (reset first). */
void sf_server_of(edge_buf *out, edge_str event, edge_str payload);

#endif
