package retryhttp_test

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/seed2409de8f/retryhttp"
	"github.com/seed2409de8f/retryhttp/inbound"
	"github.com/seed2409de8f/retryhttp/internal/testkit"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The reports at the end of a request are skipped by inlined checks
// (crosshop.go pushback, hooks.go reportStop and report): a success makes
// no Pushback report, a Transport without hooks reports nothing, and the
// logger is called only when there is one. These tests check that what is
// reported still is, with a breaker and hooks set so that RoundTrip takes
// the path that reports.

func TestPushbackMarksGiveUpsNotSuccesses(t *testing.T) {
	var failing bool
	var mu sync.Mutex
	upstream := testkit.NewCountingServer(t, func(_ int64, w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if failing {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})
	var decisions []retryhttp.Decision
	var dmu sync.Mutex
	tr := testkit.NewTransport(t, testkit.NoDelay, retryhttp.WithMaxRetries(1),
		retryhttp.WithCircuitBreaker(retryhttp.CircuitBreakerSettings{MinRequests: 1000}),
		retryhttp.WithHooks(retryhttp.Hooks{OnRetryDecision: func(d retryhttp.Decision) {
			dmu.Lock()
			defer dmu.Unlock()
			decisions = append(decisions, d)
		}}))
	client := &http.Client{Transport: tr}
	handler := inbound.Pushback(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, upstream.URL, nil)
		if !assert.NoError(t, err) {
			return
		}
		res, err := client.Do(req)
		if !assert.NoError(t, err) {
			return
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		w.WriteHeader(res.StatusCode)
	}))
	front := httptest.NewServer(handler)
	t.Cleanup(front.Close)

	call := func() *http.Response {
		res, err := front.Client().Get(front.URL)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res
	}
	res := call()
	assert.Equal(t, http.StatusOK, res.StatusCode)
	assert.Empty(t, res.Header.Get(retryhttp.RetrySignalHeader), "a success is not marked")

	mu.Lock()
	failing = true
	mu.Unlock()
	res = call()
	assert.Equal(t, http.StatusServiceUnavailable, res.StatusCode)
	assert.Equal(t, retryhttp.RetrySignalNoRetry, res.Header.Get(retryhttp.RetrySignalHeader),
		"the give-up of the outbound request marks the failure it passes on")

	dmu.Lock()
	defer dmu.Unlock()
	var stops []retryhttp.StopReason
	for _, d := range decisions {
		if !d.Retry {
			stops = append(stops, d.Reason)
		}
	}
	assert.Equal(t, []retryhttp.StopReason{retryhttp.StopSuccess, retryhttp.StopRetriesExhausted}, stops,
		"every request's stop reaches the hook, the success's included")
}

func TestLoggerWithoutHooksLogsGiveUps(t *testing.T) {
	srv := testkit.DeadServer(t)
	var out bytes.Buffer
	var mu sync.Mutex
	logger := slog.New(slog.NewTextHandler(lockedWriter{&mu, &out}, nil))
	c := &http.Client{Transport: testkit.NewTransport(t, testkit.NoDelay, retryhttp.WithMaxRetries(1), retryhttp.WithLogger(logger))}
	code, err := try(c, srv.URL)
	require.NoError(t, err)
	assert.Equal(t, http.StatusServiceUnavailable, code)
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, 1, strings.Count(out.String(), "retryhttp: giving up"), out.String())
	assert.Equal(t, 1, strings.Count(out.String(), "retryhttp: retrying"), out.String())
}

// lockedWriter serialises writes to w.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
