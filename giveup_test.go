package retryhttp_test

import (
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/seed2409de8f/retryhttp"
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
