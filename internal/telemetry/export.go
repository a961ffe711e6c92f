package telemetry

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

const (
	// requestTimeout bounds one export request, response included.
	requestTimeout = 10 * time.Second
	// maxRetryDelay is the longest Retry-After the exporter waits for
	// before its single retry; a collector asking for more gets no retry.
	maxRetryDelay = 5 * time.Second
	// defaultRetryDelay is the wait before the retry when a 429 or 503
	// response has no usable Retry-After.
	defaultRetryDelay = time.Second
	// maxResponseBytes caps how much of a response body is read.
	maxResponseBytes = 64 << 10
	// maxErrorText caps the collector text quoted in an export error.
	maxErrorText = 256

	userAgent = "edge-mcp-otlp-exporter"
)

var (
	errExporterShutdown = errors.New("OTLP exporter is shut down")
	errExportRejected   = errors.New("OTLP export rejected")
	errPartialSuccess   = errors.New("OTLP export partially rejected")
)

// exporter posts spans to an OTLP/HTTP
// collector with the OTLP JSON encoding.
type exporter struct {
	url     string
	headers map[string]string
	gzip    bool
	client  *http.Client
	// retryDelay is used when a retryable response has no Retry-After;
	// maxRetryDelay bounds the wait for a retry.
	retryDelay, maxRetryDelay time.Duration
	stopped                   atomic.Bool
}

// newExporter returns an exporter posting to url with headers, gzipping the
// request bodies when gzip is set.
func newExporter(url string, headers map[string]string, gzip bool) *exporter {
	transport := http.DefaultTransport.(*http.Transport).Clone()
	return &exporter{
		url:           url,
		headers:       maps.Clone(headers),
		gzip:          gzip,
		client:        &http.Client{Transport: transport, Timeout: requestTimeout},
		retryDelay:    defaultRetryDelay,
		maxRetryDelay: maxRetryDelay,
	}
}

// ExportSpans sends spans in one request. A 429 or 503 response is retried
// once, after the wait its Retry-After asks for (defaultRetryDelay when it
// has none) unless that wait exceeds maxRetryDelay or ctx's deadline. Any
// other non-2xx response, a transport error and a partial success reported
// by the collector are returned as errors, which the batcher logs.
func (e *exporter) ExportSpans(ctx context.Context, spans []*spanData) error {
	if e.stopped.Load() {
		return errExporterShutdown
	}
	if len(spans) == 0 {
		return nil
	}
	body, err := encodeSpans(spans)
	if err != nil {
		return fmt.Errorf("encoding %d spans: %w", len(spans), err)
	}
	if e.gzip {
		if body, err = gzipped(body); err != nil {
			return fmt.Errorf("compressing %d spans: %w", len(spans), err)
		}
	}
	retry, delay, err := e.post(ctx, body)
	if !retry {
		return err
	}
	if delay > e.maxRetryDelay {
		return fmt.Errorf("%w (not retried: the collector asked to wait %v)", err, delay)
	}
	if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < delay {
		return fmt.Errorf("%w (not retried: the export deadline comes before the retry)", err)
	}
	timer := time.NewTimer(delay)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return fmt.Errorf("%w (retry abandoned: %w)", err, ctx.Err())
	case <-timer.C:
	}
	_, _, err = e.post(ctx, body)
	return err
}

// post sends one export request with body. retry reports a response that
// may be retried, after delay.
func (e *exporter) post(ctx context.Context, body []byte) (retry bool, delay time.Duration, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url, bytes.NewReader(body))
	if err != nil {
		return false, 0, fmt.Errorf("creating export request for %s: %w", e.url, err)
	}
	req.Header.Set("User-Agent", userAgent)
	for k, v := range e.headers {
		req.Header.Set(k, v)
	}
	req.Header.Set("Content-Type", "application/json")
	if e.gzip {
		req.Header.Set("Content-Encoding", "gzip")
	}
	resp, err := e.client.Do(req)
	if err != nil {
		return false, 0, fmt.Errorf("exporting spans: %w", err)
	}
	defer resp.Body.Close()
	data, readErr := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		if readErr != nil {
			return false, 0, nil // the spans were accepted; the rest is informational
		}
		return false, 0, partialSuccess(data)
	}
	err = fmt.Errorf("%w: %s answered %s%s", errExportRejected, e.url, resp.Status, errorDetail(resp.Header.Get("Content-Type"), data))
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable {
		delay, ok := parseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
		if !ok {
			delay = e.retryDelay
		}
		return true, delay, err
	}
	return false, 0, err
}

// Shutdown stops the exporter: later ExportSpans calls fail and idle
// connections are closed.
func (e *exporter) Shutdown(context.Context) error {
	e.stopped.Store(true)
	e.client.CloseIdleConnections()
	return nil
}

// partialSuccess returns an error when data, the JSON body of a successful
// export response, reports rejected spans or a warning.
func partialSuccess(data []byte) error {
	var resp struct {
		PartialSuccess *struct {
			RejectedSpans json.RawMessage `json:"rejectedSpans"` // int64: a string, or a number
			ErrorMessage  string          `json:"errorMessage"`
		} `json:"partialSuccess"`
	}
	if len(bytes.TrimSpace(data)) == 0 || json.Unmarshal(data, &resp) != nil || resp.PartialSuccess == nil {
		return nil // not JSON (or not a response) is no reason to fail delivered spans
	}
	rejected := strings.Trim(string(resp.PartialSuccess.RejectedSpans), `"`)
	if (rejected == "" || rejected == "0") && resp.PartialSuccess.ErrorMessage == "" {
		return nil
	}
	if rejected == "" {
		rejected = "0"
	}
	return fmt.Errorf("%w: %s spans rejected: %q", errPartialSuccess, rejected, resp.PartialSuccess.ErrorMessage)
}

// errorDetail returns the text of an error response body to append to an
// error: the message of a JSON google.rpc.Status, or the start of a text
// body, quoted; "" for anything else.
func errorDetail(contentType string, data []byte) string {
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return ""
	}
	mediaType, _, _ := mime.ParseMediaType(contentType)
	var text string
	switch {
	case mediaType == "application/json":
		var status struct {
			Message string `json:"message"`
		}
		if json.Unmarshal(data, &status) == nil && status.Message != "" {
			text = status.Message
		} else {
			text = string(data)
		}
	case strings.HasPrefix(mediaType, "text/"):
		text = string(data)
	default:
		return ""
	}
	if len(text) > maxErrorText {
		text = text[:maxErrorText] + "..."
	}
	return ": " + strconv.Quote(strings.ToValidUTF8(text, "\uFFFD"))
}

// parseRetryAfter returns the wait a Retry-After header value v asks for at
// time now: delay-seconds or an HTTP date, never negative. ok is false when v
// is neither.
func parseRetryAfter(v string, now time.Time) (delay time.Duration, ok bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if strings.Trim(v, "0123456789") == "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil || n > uint64(math.MaxInt64/time.Second) {
			return math.MaxInt64, true
		}
		return time.Duration(n) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return max(t.Sub(now), 0), true
}

func gzipped(data []byte) ([]byte, error) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(data); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
