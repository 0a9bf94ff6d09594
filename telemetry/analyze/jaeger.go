package analyze

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// JaegerQuery asks a running Jaeger's query service (API v3,
// GET /api/v3/traces) for the traces of a service in a time range. Jaeger
// answers with whole traces, both ends' spans included, as a stream of
// {"result": <OTLP JSON>} lines, which Scan reads like a file.
type JaegerQuery struct {
	// URL is the query service's base URL (http://jaeger:16686).
	URL string
	// Service is the service whose traces to fetch (service.name of the
	// sender or of the receiver).
	Service string
	// Operation, if set, narrows to traces with a span of this name.
	Operation string
	// Since and Until bound the traces' start; both required.
	Since, Until time.Time
	// Limit is the most traces to fetch (query.num_traces); 0 means 1000.
	Limit int
	// Client is the HTTP client; nil means one with a 5-minute timeout.
	Client *http.Client
}

// JaegerSource validates q and returns it as a Scan source.
func JaegerSource(q JaegerQuery) (Source, error) {
	u, err := url.Parse(q.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return Source{}, fmt.Errorf("analyze: Jaeger URL %q: want http(s)://host:port of the query service", q.URL)
	}
	if q.Service == "" {
		return Source{}, fmt.Errorf("analyze: Jaeger query: a service name is required (the sender's or the receiver's service.name)")
	}
	if q.Since.IsZero() || q.Until.IsZero() || !q.Until.After(q.Since) {
		return Source{}, fmt.Errorf("analyze: Jaeger query time range [%v, %v): want both set, since before until", q.Since, q.Until)
	}
	if q.Limit == 0 {
		q.Limit = 1000
	}
	if q.Limit < 1 || q.Limit > 1_000_000 {
		return Source{}, fmt.Errorf("analyze: Jaeger query limit %d: valid 1..1000000", q.Limit)
	}
	v := url.Values{
		"query.service_name":   {q.Service},
		"query.start_time_min": {q.Since.UTC().Format(time.RFC3339Nano)},
		"query.start_time_max": {q.Until.UTC().Format(time.RFC3339Nano)},
		"query.num_traces":     {strconv.Itoa(q.Limit)},
		"query.raw_traces":     {"true"}, // no clock-skew adjustment: simulated spans carry virtual time
	}
	if q.Operation != "" {
		v.Set("query.operation_name", q.Operation)
	}
	full := strings.TrimSuffix(u.String(), "/") + "/api/v3/traces?" + v.Encode()
	client := q.Client
	if client == nil {
		client = &http.Client{Timeout: 5 * time.Minute}
	}
	return Source{Name: "jaeger " + u.Host + " service " + q.Service, Open: func(ctx context.Context) (io.ReadCloser, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, full, nil)
		if err != nil {
			return nil, fmt.Errorf("analyze: Jaeger query: %w", err)
		}
		req.Header.Set("Accept", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			return nil, fmt.Errorf("analyze: Jaeger query: %w", err)
		}
		switch resp.StatusCode {
		case http.StatusOK:
			return resp.Body, nil
		case http.StatusNotFound:
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
			resp.Body.Close()
			// Jaeger answers 404 when no trace matches.
			if strings.Contains(string(body), "not found") || strings.Contains(string(body), "NotFound") {
				return io.NopCloser(strings.NewReader("")), nil
			}
			return nil, fmt.Errorf("analyze: Jaeger query %s: HTTP %d: %.200s (is %s the query service, port 16686?)", full, resp.StatusCode, body, q.URL)
		default:
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
			resp.Body.Close()
			return nil, fmt.Errorf("analyze: Jaeger query %s: HTTP %d: %.200s", full, resp.StatusCode, body)
		}
	}}, nil
}
