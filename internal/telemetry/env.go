package telemetry

import (
	"fmt"
	"maps"
	"net/url"
	"os"
	"strconv"
	"strings"
)

// Samplers, the values of Config.Sampler and of OTEL_TRACES_SAMPLER.
// "parentbased_" samplers follow the sampling decision of a parent span
// from a client and apply the rest of the name to traces the gateway
// starts.
const (
	SamplerParentBasedRatio     = "parentbased_traceidratio" // the default; ratio Config.SampleRatio
	SamplerRatio                = "traceidratio"             // ratio Config.SampleRatio, parents ignored
	SamplerAlwaysOn             = "always_on"
	SamplerAlwaysOff            = "always_off" // tracing off: Setup returns a nil *Tracer
	SamplerParentBasedAlwaysOn  = "parentbased_always_on"
	SamplerParentBasedAlwaysOff = "parentbased_always_off"
)

// Environment variables FromEnv reads, as the OpenTelemetry specification
// names them.
const (
	EnvEndpoint       = "OTEL_EXPORTER_OTLP_ENDPOINT"        // base URL; /v1/traces is appended
	EnvTracesEndpoint = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT" // full URL, used as is
	EnvHeaders        = "OTEL_EXPORTER_OTLP_HEADERS"         // k=v,k2=v2, values URL-encoded
	EnvTracesHeaders  = "OTEL_EXPORTER_OTLP_TRACES_HEADERS"
	EnvCompression    = "OTEL_EXPORTER_OTLP_COMPRESSION" // gzip or none
	EnvServiceName    = "OTEL_SERVICE_NAME"
	EnvSampler        = "OTEL_TRACES_SAMPLER"
	EnvSamplerArg     = "OTEL_TRACES_SAMPLER_ARG" // the ratio of the ratio samplers
)

// FromEnv returns cfg completed from the standard OpenTelemetry environment
// variables (the Env constants) wherever cfg leaves a setting empty; what
// the configuration says always wins:
//
//   - Endpoint: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT as is, else
//     OTEL_EXPORTER_OTLP_ENDPOINT with "/v1/traces" appended to its path.
//   - Headers: OTEL_EXPORTER_OTLP_HEADERS, then ..._TRACES_HEADERS, added
//     for names cfg.Headers does not set (a new map; cfg's is not changed).
//   - ServiceName: OTEL_SERVICE_NAME.
//   - Compression: OTEL_EXPORTER_OTLP_COMPRESSION ("none" is no compression).
//   - Sampler and SampleRatio, when both are unset: OTEL_TRACES_SAMPLER and
//     OTEL_TRACES_SAMPLER_ARG (default 1) for the ratio samplers.
//
// Tracing stays off when neither cfg nor the environment names an
// endpoint. A value FromEnv cannot use (an unknown sampler, a ratio outside
// [0, 1], a malformed header list) is kept in the returned Config so that
// Setup fails with ErrInvalidConfig naming the variable.
func FromEnv(cfg Config) Config {
	if cfg.Endpoint == "" {
		if e := os.Getenv(EnvTracesEndpoint); e != "" {
			cfg.Endpoint = e
		} else if e := os.Getenv(EnvEndpoint); e != "" {
			cfg.Endpoint = strings.TrimRight(e, "/") + defaultTracesPath
		}
	}
	if cfg.ServiceName == "" {
		cfg.ServiceName = os.Getenv(EnvServiceName)
	}
	if cfg.Compression == "" {
		if c := os.Getenv(EnvCompression); c != "none" {
			cfg.Compression = c
		}
	}
	cfg.Headers = envHeaders(&cfg)
	if cfg.Sampler == "" && cfg.SampleRatio == 0 {
		envSampler(&cfg)
	}
	return cfg
}

// envHeaders returns cfg.Headers with the headers of the environment added
// for names it does not set.
func envHeaders(cfg *Config) map[string]string {
	headers := maps.Clone(cfg.Headers)
	for _, name := range []string{EnvTracesHeaders, EnvHeaders} {
		v := os.Getenv(name)
		if v == "" {
			continue
		}
		parsed, err := parseHeaders(v)
		if err != nil {
			cfg.envErr = fmt.Errorf("%s: %w", name, err)
			continue
		}
		if headers == nil {
			headers = make(map[string]string, len(parsed))
		}
		for k, v := range parsed {
			if _, set := headers[k]; !set {
				headers[k] = v
			}
		}
	}
	return headers
}

// parseHeaders parses a list of name=value pairs separated by commas, the
// values URL-encoded (W3C Baggage syntax, as OTEL_EXPORTER_OTLP_HEADERS).
func parseHeaders(s string) (map[string]string, error) {
	out := map[string]string{}
	for pair := range strings.SplitSeq(s, ",") {
		if strings.TrimSpace(pair) == "" {
			continue
		}
		k, v, ok := strings.Cut(pair, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, fmt.Errorf("%q is not name=value", pair)
		}
		val, err := url.PathUnescape(strings.TrimSpace(v))
		if err != nil {
			return nil, fmt.Errorf("value of %s: %w", k, err)
		}
		out[k] = val
	}
	return out, nil
}

// envSampler sets cfg.Sampler and cfg.SampleRatio from OTEL_TRACES_SAMPLER
// and OTEL_TRACES_SAMPLER_ARG.
func envSampler(cfg *Config) {
	sampler := strings.ToLower(strings.TrimSpace(os.Getenv(EnvSampler)))
	if sampler == "" {
		return
	}
	switch sampler {
	case SamplerAlwaysOn, SamplerAlwaysOff, SamplerParentBasedAlwaysOn, SamplerParentBasedAlwaysOff:
		cfg.Sampler = sampler
		return
	case SamplerRatio, SamplerParentBasedRatio:
	default:
		cfg.envErr = fmt.Errorf("%s: sampler %q is not supported", EnvSampler, sampler)
		return
	}
	ratio := 1.0
	if arg := strings.TrimSpace(os.Getenv(EnvSamplerArg)); arg != "" {
		r, err := strconv.ParseFloat(arg, 64)
		if err != nil || !(r >= 0 && r <= 1) {
			cfg.envErr = fmt.Errorf("%s: %q is not a ratio in [0, 1]", EnvSamplerArg, arg)
			return
		}
		ratio = r
	}
	cfg.Sampler = sampler
	switch {
	case ratio > 0:
		cfg.SampleRatio = ratio
	case sampler == SamplerRatio: // 0: SampleRatio would read it as 1
		cfg.Sampler = SamplerAlwaysOff
	default:
		cfg.Sampler = SamplerParentBasedAlwaysOff
	}
}
