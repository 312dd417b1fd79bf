package retryhttp_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/seed2409de8f/retryhttp"
	"github.com/seed2409de8f/retryhttp/retryhttptest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestWithClock checks that the transport waits through the clock it is
// given, and through the real clock again after WithClock(nil).
func TestWithClock(t *testing.T) {
	oneMs := retryhttp.WithDelayFn(func(retryhttp.Attempt) time.Duration { return time.Millisecond })
	tests := []struct {
		name      string
		nilAfter  bool
		wantFaked int
	}{
		{"fake clock", false, 2},
		{"nil restores the real clock", true, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newCountingServer(t, statusThen(http.StatusServiceUnavailable, 2))
			clock := retryhttptest.NewClock(time.Unix(0, 0))
			opts := []retryhttp.Option{oneMs, unlimitedBudget, retryhttp.WithClock(clock)}
			if tt.nilAfter {
				opts = append(opts, retryhttp.WithClock(nil))
			}
			res, err := (&http.Client{Transport: newTransport(t, opts...)}).Get(srv.URL)
			require.NoError(t, err)
			res.Body.Close()
			assert.Equal(t, http.StatusOK, res.StatusCode)
			assert.Len(t, clock.Sleeps(), tt.wantFaked)
			assert.EqualValues(t, 3, srv.attempts.Load())
		})
	}
}
