package retryhttp_test

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seed2409de8f/retryhttp"
	"github.com/seed2409de8f/retryhttp/inbound"
	"github.com/seed2409de8f/retryhttp/internal/testkit"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestErrorOnGiveUp(t *testing.T) {
	retryAfterHour := func(_ int64, w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Retry-After", "3600")
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	tests := []struct {
		name         string
		handler      testkit.HandlerFn
		options      []retryhttp.Option
		wantAttempts int
		wantReason   retryhttp.StopReason
		wantIs       error
		wantMsg      string
	}{
		{"retries exhausted", testkit.Always(http.StatusServiceUnavailable), []retryhttp.Option{testkit.UnlimitedBudget},
			4, retryhttp.StopRetriesExhausted, retryhttp.ErrRetriesExhausted,
			"retryhttp: giving up after 4 attempts: last status 503 Service Unavailable"},
		{"429", testkit.Always(http.StatusTooManyRequests), []retryhttp.Option{testkit.UnlimitedBudget, retryhttp.WithMaxRetries(1)},
			2, retryhttp.StopRetriesExhausted, retryhttp.ErrRetriesExhausted,
			"retryhttp: giving up after 2 attempts: last status 429 Too Many Requests"},
		{"budget refused", testkit.Always(http.StatusBadGateway),
			[]retryhttp.Option{testkit.NoParking(retryhttp.RetryBudgetOptions{Capacity: 1})},
			2, retryhttp.StopBudgetRefused, retryhttp.ErrRetryBudgetExhausted,
			"retryhttp: giving up after 2 attempts (budget refused): last status 502 Bad Gateway"},
		{"delay too long", retryAfterHour, []retryhttp.Option{testkit.UnlimitedBudget, retryhttp.WithDelayFn(nil)},
			1, retryhttp.StopDelayTooLong, retryhttp.ErrRetriesExhausted,
			"retryhttp: giving up after 1 attempt (delay too long): last status 503 Service Unavailable"},
		{"hedged", testkit.Always(http.StatusServiceUnavailable), []retryhttp.Option{testkit.UnlimitedBudget, retryhttp.WithHedging(time.Hour, 1)},
			4, retryhttp.StopRetriesExhausted, retryhttp.ErrRetriesExhausted,
			"retryhttp: giving up after 4 attempts: last status 503 Service Unavailable"},
		{"unknown status", testkit.Always(599), []retryhttp.Option{testkit.UnlimitedBudget, retryhttp.WithMaxRetries(0),
			retryhttp.WithShouldRetryFn(func(retryhttp.Attempt) bool { return true })},
			1, 0, nil, ""}, // sent once: not a give-up
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := testkit.NewCountingServer(t, func(n int64, w http.ResponseWriter, r *http.Request) {
				tt.handler(n, w, r)
				_, _ = io.WriteString(w, strings.Repeat("x", 1000)) // drained, so the connection is reused
			})
			var stop retryhttp.Decision
			opts := append([]retryhttp.Option{testkit.NoDelay, retryhttp.WithErrorOnGiveUp(true),
				retryhttp.WithHooks(retryhttp.Hooks{OnRetryDecision: func(d retryhttp.Decision) {
					if !d.Retry {
						stop = d
					}
				}})}, tt.options...)
			tr := testkit.NewTransport(t, opts...)
			res, err := (&http.Client{Transport: tr}).Get(srv.URL)
			assert.EqualValues(t, tt.wantAttempts, srv.Attempts.Load())
			if tt.wantIs == nil {
				require.NoError(t, err)
				res.Body.Close()
				return
			}
			require.Error(t, err)
			assert.Nil(t, res)
			assert.ErrorIs(t, err, tt.wantIs)
			var g *retryhttp.GiveUpError
			require.True(t, errors.As(err, &g))
			assert.Equal(t, tt.wantAttempts, g.Attempts)
			assert.Equal(t, tt.wantReason, g.Reason)
			assert.Equal(t, tt.wantMsg, g.Error())
			assert.Nil(t, stop.Attempt.Res, "the hook sees what RoundTrip returns")
			assert.ErrorIs(t, stop.Attempt.Err, tt.wantIs)
			assert.Equal(t, tt.wantReason, stop.Reason)
			if tt.name != "hedged" { // hedges are cancelled: their connections are not reused
				assert.EqualValues(t, 1, srv.Conns.Load(), "the responses were drained and their connection reused")
			}
		})
	}
}

// TestErrorOnGiveUpLeavesOtherOutcomes checks that outcomes the transport
// did not give up on are returned as without the option.
func TestErrorOnGiveUpLeavesOtherOutcomes(t *testing.T) {
	tests := []struct {
		name   string
		give   testkit.HandlerFn
		method string
		want   int
	}{
		{"success", testkit.Always(http.StatusOK), http.MethodGet, http.StatusOK},
		{"not retried: 500", testkit.Always(http.StatusInternalServerError), http.MethodGet, http.StatusInternalServerError},
		{"not retried: 503 to a POST", testkit.Always(http.StatusServiceUnavailable), http.MethodPost, http.StatusServiceUnavailable},
		{"recovered", testkit.StatusThen(http.StatusServiceUnavailable, 2), http.MethodGet, http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := testkit.NewCountingServer(t, tt.give)
			tr := testkit.NewTransport(t, testkit.NoDelay, testkit.UnlimitedBudget, retryhttp.WithErrorOnGiveUp(true))
			req, _ := http.NewRequest(tt.method, srv.URL, nil)
			res, err := (&http.Client{Transport: tr}).Do(req)
			require.NoError(t, err)
			res.Body.Close()
			assert.Equal(t, tt.want, res.StatusCode)
		})
	}
	t.Run("off by default", func(t *testing.T) {
		srv := testkit.NewCountingServer(t, testkit.Always(http.StatusServiceUnavailable))
		tr := testkit.NewTransport(t, testkit.NoDelay, testkit.UnlimitedBudget)
		res, err := (&http.Client{Transport: tr}).Get(srv.URL)
		require.NoError(t, err)
		res.Body.Close()
		assert.Equal(t, http.StatusServiceUnavailable, res.StatusCode)
	})
	t.Run("errors unchanged", func(t *testing.T) {
		tr := testkit.NewTransport(t, testkit.NoDelay, testkit.UnlimitedBudget, retryhttp.WithErrorOnGiveUp(true))
		res, err := (&http.Client{Transport: tr}).Get(closedURL(t))
		require.Error(t, err)
		assert.Nil(t, res)
		assert.ErrorIs(t, err, retryhttp.ErrRetriesExhausted)
		var g *retryhttp.GiveUpError
		assert.False(t, errors.As(err, &g))
	})
}

// closedURL returns the URL of a loopback port that nobody listens on: a
// request to it is refused.
func closedURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return "http://" + addr + "/"
}

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
