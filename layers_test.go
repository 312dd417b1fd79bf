package retryhttp_test

import (
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/seed2409de8f/retryhttp/internal/testkit"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestOuterRetryNotRetriedAgain(t *testing.T) {
	// A layer above that says a request is its retry (the AWS SDK's
	// amz-sdk-request) gets one attempt of it; its first attempt, or a
	// header that says nothing readable, gets the transport's retries.
	tests := []struct {
		name string
		give string
		want int64
	}{
		{"no outer layer", "", 4},
		{"outer first attempt", "attempt=1; max=3", 4},
		{"outer retry", "attempt=2; max=3", 1},
		{"malformed", "attempt=two; max=3", 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := testkit.NewCountingServer(t, testkit.Always(http.StatusServiceUnavailable))
			tr := testkit.NewTransport(t, testkit.NoDelay)
			req := testkit.NewRequest(t, http.MethodGet, srv.URL, nil)
			if tt.give != "" {
				req.Header.Set("amz-sdk-request", tt.give)
			}

			res, err := tr.RoundTrip(req)
			require.NoError(t, err)
			testkit.ReadAll(t, res)

			assert.Equal(t, tt.want, srv.Attempts.Load())
		})
	}
}

func TestOuterInvocationIDIsTheInjectedKey(t *testing.T) {
	// Every attempt of an outer layer's call carries one key: the outer
	// layer's invocation ID, so a server can tell them for one call.
	const id = "0d7e1a4c-3b0f-4c53-9d0e-8f1b2a3c4d5e"
	var mu sync.Mutex
	var keys []string
	srv := testkit.NewCountingServer(t, func(_ int64, w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		keys = append(keys, r.Header.Get("Idempotency-Key"))
		mu.Unlock()
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	tr := testkit.NewTransport(t, testkit.NoDelay)
	for attempt := range 3 {
		req := testkit.NewRequest(t, http.MethodPost, srv.URL, strings.NewReader("payload"))
		req.Header.Set("amz-sdk-invocation-id", id)
		req.Header.Set("amz-sdk-request", "attempt="+string(rune('1'+attempt))+"; max=3")
		res, err := tr.RoundTrip(req)
		require.NoError(t, err)
		testkit.ReadAll(t, res)
	}

	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []string{id, id, id}, keys)
}
