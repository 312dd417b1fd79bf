package integrations

import (
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-resty/resty/v2"
	"github.com/seed2409de8f/retryhttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRestyOverTransportAttempts(t *testing.T) {
	// resty over the transport against a dead server, no retry budget (so
	// the counts do not depend on a budget's tokens): each of resty's
	// attempts is a first attempt to the transport, which retries it. With
	// resty's retries off, as docs/integrations.md advises, the transport's
	// 4 attempts are all.
	tests := []struct {
		name         string
		restyRetries int
		want         int64
	}{
		{"resty's retries off", 0, 4},
		{"resty's SetRetryCount(3)", 3, 16},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var attempts atomic.Int64
			tr := retryhttp.New(retryhttp.WithRetryBudget(nil), noDelay,
				retryhttp.WithHooks(retryhttp.Hooks{OnAttempt: func(retryhttp.AttemptInfo) { attempts.Add(1) }}))
			client := resty.NewWithClient(&http.Client{Transport: tr}).
				SetRetryCount(tt.restyRetries).
				SetRetryWaitTime(time.Millisecond).
				SetRetryMaxWaitTime(time.Millisecond)

			_, err := client.R().Get(refusedURL(t))

			require.Error(t, err)
			assert.Equal(t, tt.want, attempts.Load())
		})
	}
}
