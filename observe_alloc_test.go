package retryhttp_test

import (
	"io"
	"log/slog"
	"testing"

	"github.com/seed2409de8f/retryhttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestObservabilityUnsetAddsNoAllocs checks that a transport without hooks
// or logger, whether never set or set to nil, allocates on the happy path
// exactly what the bare base transport does; and that no-op hooks and a
// logger whose level hides retries add nothing either, since a request that
// succeeds at once writes no record.
func TestObservabilityUnsetAddsNoAllocs(t *testing.T) {
	const url = "http://example.test/"
	base := retryhttp.WithTransport(memTransport{})
	quiet := slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelWarn}))
	tests := []struct {
		name string
		give *retryhttp.Transport
	}{
		{"unset", retryhttp.New(base)},
		{"set to nil", retryhttp.New(base, retryhttp.WithLogger(nil), retryhttp.WithHooks(retryhttp.Hooks{}),
			retryhttp.WithHooks(retryhttp.Hooks{OnAttempt: nil, OnRetryDecision: nil, OnPark: nil, OnCircuitStateChange: nil}))},
		{"no-op hooks and a quiet logger", retryhttp.New(base, retryhttp.WithLogger(quiet),
			retryhttp.WithHooks(retryhttp.Hooks{
				OnAttempt:       func(retryhttp.AttemptInfo) {},
				OnRetryDecision: func(retryhttp.Decision) {},
			}))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.NoError(t, roundTripOnce(tt.give, url, newGET))
			bare := testing.AllocsPerRun(100, mustRoundTrip(memTransport{}, url, newGET))
			ours := testing.AllocsPerRun(100, mustRoundTrip(tt.give, url, newGET))
			assert.Positive(t, bare)
			assert.LessOrEqual(t, ours, bare, "allocations per GET: bare %v, retryhttp %v", bare, ours)
		})
	}
}
