package retryhttp_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/seed2409de8f/retryhttp"
	"github.com/seed2409de8f/retryhttp/internal/testkit"
	"github.com/seed2409de8f/retryhttp/retryhttptest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// hang blocks until the client goes away, or a safety bound passes. It reads
// the request body first: only then can the server notice the client leave.
func hang(r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	select {
	case <-r.Context().Done():
	case <-time.After(10 * time.Second):
	}
}

// hangFirst hangs on the first hung requests and answers the others with 200
// and the body "ok".
func hangFirst(hung int64) testkit.HandlerFn {
	return func(n int64, w http.ResponseWriter, r *http.Request) {
		if n <= hung {
			hang(r)
			return
		}
		_, _ = io.WriteString(w, "ok")
	}
}

func TestAttemptTimeoutRetriesIdempotentRequest(t *testing.T) {
	srv := testkit.NewCountingServer(t, hangFirst(1))
	tr := testkit.NewTransport(t, testkit.NoDelay, retryhttp.WithAttemptTimeout(250*time.Millisecond))

	res, err := (&http.Client{Transport: tr}).Get(srv.URL)
	require.NoError(t, err)

	assert.Equal(t, "ok", testkit.ReadAll(t, res))
	assert.Equal(t, int64(2), srv.Attempts.Load())
}

func TestAttemptTimeoutPOSTNotRetried(t *testing.T) {
	srv := testkit.NewCountingServer(t, hangFirst(1))
	tr := testkit.NewTransport(t, testkit.NoDelay, retryhttp.WithAttemptTimeout(100*time.Millisecond))

	start := time.Now()
	res, err := (&http.Client{Transport: tr}).Post(srv.URL, "text/plain", strings.NewReader("x"))

	assert.Nil(t, res)
	assert.ErrorIs(t, err, retryhttp.ErrAttemptTimeout)
	assert.True(t, retryhttp.IsTimeoutErr(err))
	var netErr net.Error
	if assert.ErrorAs(t, err, &netErr) {
		assert.True(t, netErr.Timeout(), "the client's *url.Error reports a timeout")
	}
	assert.NotErrorIs(t, err, context.DeadlineExceeded, "not the caller's deadline")
	assert.Equal(t, int64(1), srv.Attempts.Load())
	assert.Less(t, time.Since(start), 5*time.Second)
}

func TestAttemptTimeoutExhaustedOnGET(t *testing.T) {
	srv := testkit.NewCountingServer(t, hangFirst(100))
	tr := testkit.NewTransport(t, testkit.NoDelay, retryhttp.WithAttemptTimeout(50*time.Millisecond), retryhttp.WithMaxRetries(1))

	res, err := (&http.Client{Transport: tr}).Get(srv.URL)

	assert.Nil(t, res)
	assert.ErrorIs(t, err, retryhttp.ErrRetriesExhausted)
	assert.ErrorIs(t, err, retryhttp.ErrAttemptTimeout)
	assert.True(t, retryhttp.IsTimeoutErr(err))
	assert.Equal(t, int64(2), srv.Attempts.Load())
}

func TestAttemptTimeoutDoesNotCutReturnedBody(t *testing.T) {
	// The body's tail comes four attempt timeouts after its head, on a
	// clock the test moves (retryhttp.NewFakeTime).
	const timeout = 150 * time.Millisecond
	clock := retryhttptest.NewManualClock(time.Now())
	tail := make(chan struct{})
	srv := testkit.NewCountingServer(t, func(_ int64, w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "head-")
		_ = http.NewResponseController(w).Flush()
		<-tail
		_, _ = io.WriteString(w, "tail")
	})
	tr := testkit.NewTransport(t, testkit.NoDelay, retryhttp.WithAttemptTimeout(timeout), retryhttp.WithClock(clock))

	res, err := (&http.Client{Transport: tr}).Get(srv.URL)
	require.NoError(t, err)
	head := make([]byte, len("head-"))
	_, err = io.ReadFull(res.Body, head)
	require.NoError(t, err)
	clock.Advance(4 * timeout)
	close(tail)

	assert.Equal(t, "head-tail", string(head)+testkit.ReadAll(t, res))
	assert.Equal(t, int64(1), srv.Attempts.Load())
}

func TestAttemptTimeoutBoundsDrainOfDiscardedBody(t *testing.T) {
	// The first response is a 503 whose body trickles and never ends; it
	// must be let go of within about one attempt timeout.
	srv := testkit.NewCountingServer(t, func(n int64, w http.ResponseWriter, r *http.Request) {
		if n > 1 {
			_, _ = io.WriteString(w, "ok")
			return
		}
		w.WriteHeader(503)
		_ = http.NewResponseController(w).Flush()
		hang(r)
	})
	tr := testkit.NewTransport(t, testkit.NoDelay, retryhttp.WithAttemptTimeout(100*time.Millisecond))

	start := time.Now()
	res, err := (&http.Client{Transport: tr}).Get(srv.URL)
	require.NoError(t, err)

	assert.Equal(t, "ok", testkit.ReadAll(t, res))
	assert.Less(t, time.Since(start), 5*time.Second)
	assert.Equal(t, int64(2), srv.Attempts.Load())
}

func TestSetAttemptTimeoutOverridesTransport(t *testing.T) {
	tests := []struct {
		name        string
		giveOptions []retryhttp.Option
		giveTimeout time.Duration
		giveHandler testkit.HandlerFn
		want        int64
	}{
		{
			name:        "set where the transport has none",
			giveTimeout: 250 * time.Millisecond,
			giveHandler: hangFirst(1),
			want:        2,
		},
		{
			name:        "zero removes the transport's",
			giveOptions: []retryhttp.Option{retryhttp.WithAttemptTimeout(20 * time.Millisecond)},
			giveTimeout: 0,
			giveHandler: func(_ int64, w http.ResponseWriter, _ *http.Request) {
				time.Sleep(200 * time.Millisecond)
				_, _ = io.WriteString(w, "ok")
			},
			want: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := testkit.NewCountingServer(t, tt.giveHandler)
			tr := testkit.NewTransport(t, append([]retryhttp.Option{testkit.NoDelay}, tt.giveOptions...)...)
			ctx := retryhttp.SetAttemptTimeout(context.Background(), tt.giveTimeout)
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
			require.NoError(t, err)

			res, err := tr.RoundTrip(req)
			require.NoError(t, err)

			assert.Equal(t, "ok", testkit.ReadAll(t, res))
			assert.Equal(t, tt.want, srv.Attempts.Load())
		})
	}
}

func TestCallerDeadlineDuringAttemptNotRetried(t *testing.T) {
	tests := []struct {
		name        string
		giveOptions []retryhttp.Option
	}{
		{name: "no attempt timeout"},
		{name: "longer attempt timeout", giveOptions: []retryhttp.Option{retryhttp.WithAttemptTimeout(time.Minute)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			const deadline = 200 * time.Millisecond
			srv := testkit.NewCountingServer(t, hangFirst(100))
			tr := testkit.NewTransport(t, append([]retryhttp.Option{testkit.NoDelay}, tt.giveOptions...)...)
			ctx, cancel := context.WithTimeout(context.Background(), deadline)
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
			require.NoError(t, err)

			start := time.Now()
			res, err := tr.RoundTrip(req)

			assert.Less(t, time.Since(start), deadline+time.Second, "returns promptly")
			assert.Nil(t, res)
			assert.ErrorIs(t, err, context.DeadlineExceeded)
			assert.NotErrorIs(t, err, retryhttp.ErrAttemptTimeout)
			assert.NotErrorIs(t, err, retryhttp.ErrRetriesExhausted)
			assert.Equal(t, int64(1), srv.Attempts.Load())
		})
	}
}

func TestNoPointlessSleep(t *testing.T) {
	future := time.Now().Add(time.Hour).UTC().Format(http.TimeFormat)
	tests := []struct {
		name           string
		giveRetryAfter string
		giveDeadline   time.Duration // 0: none
		giveMaxDelay   time.Duration // 0: default
	}{
		{name: "Retry-After past the deadline", giveRetryAfter: "30", giveDeadline: time.Second},
		{name: "Retry-After above WithMaxDelay", giveRetryAfter: "30", giveMaxDelay: time.Second},
		{name: "Retry-After above the default max delay", giveRetryAfter: "3600"},
		{name: "Retry-After date above the default max delay", giveRetryAfter: future},
		{name: "huge Retry-After", giveRetryAfter: "99999999999999999999999"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := testkit.NewCountingServer(t, func(_ int64, w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Retry-After", tt.giveRetryAfter)
				w.WriteHeader(503)
				_, _ = io.WriteString(w, "come back later")
			})
			var options []retryhttp.Option
			if tt.giveMaxDelay > 0 {
				options = append(options, retryhttp.WithMaxDelay(tt.giveMaxDelay))
			}
			tr := testkit.NewTransport(t, options...)
			ctx := context.Background()
			if tt.giveDeadline > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tt.giveDeadline)
				defer cancel()
			}
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
			require.NoError(t, err)

			start := time.Now()
			res, err := tr.RoundTrip(req)
			require.NoError(t, err)

			assert.Less(t, time.Since(start), 500*time.Millisecond, "no wait at all")
			assert.Equal(t, 503, res.StatusCode)
			assert.Equal(t, "come back later", testkit.ReadAll(t, res), "the response is readable")
			assert.Equal(t, int64(1), srv.Attempts.Load())
		})
	}
}

func TestCancelWhileWaiting(t *testing.T) {
	srv := testkit.NewCountingServer(t, testkit.Always(503))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tr := testkit.NewTransport(t, retryhttp.WithDelayFn(func(retryhttp.Attempt) time.Duration {
		time.AfterFunc(50*time.Millisecond, cancel)
		return 10 * time.Second
	}))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	require.NoError(t, err)

	start := time.Now()
	res, err := tr.RoundTrip(req)

	assert.Less(t, time.Since(start), 2*time.Second, "returns promptly")
	assert.Nil(t, res)
	assert.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, int64(1), srv.Attempts.Load())
}

func TestDeadlineNotWaitedPast(t *testing.T) {
	// Backoff of 10s with a deadline in 1s: the 503 comes back at once,
	// not a context deadline error a second later.
	srv := testkit.NewCountingServer(t, testkit.Always(503))
	tr := testkit.NewTransport(t, retryhttp.WithDelayFn(func(retryhttp.Attempt) time.Duration { return 10 * time.Second }))
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	require.NoError(t, err)

	start := time.Now()
	res, err := tr.RoundTrip(req)
	require.NoError(t, err)
	testkit.ReadAll(t, res)

	assert.Less(t, time.Since(start), 500*time.Millisecond)
	assert.Equal(t, 503, res.StatusCode)
	assert.Equal(t, int64(1), srv.Attempts.Load())
}

func TestStalledDiscardedBodyDoesNotBlock(t *testing.T) {
	// The first response is a 503 whose body never comes: without an
	// attempt timeout, draining it must still not hold up the retry.
	srv := testkit.NewCountingServer(t, func(n int64, w http.ResponseWriter, r *http.Request) {
		if n > 1 {
			_, _ = io.WriteString(w, "ok")
			return
		}
		w.WriteHeader(503)
		_, _ = io.WriteString(w, "partial")
		_ = http.NewResponseController(w).Flush()
		hang(r)
	})
	for _, tt := range []struct {
		name string
		give []retryhttp.Option
	}{
		{name: "no attempt timeout"},
		// Regression: with an attempt timeout, the drain was bounded by a
		// whole attempt timeout (here 30s) instead of the shorter drain
		// bound.
		{name: "long attempt timeout", give: []retryhttp.Option{retryhttp.WithAttemptTimeout(30 * time.Second)}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv.Attempts.Store(0)
			tr := testkit.NewTransport(t, append([]retryhttp.Option{testkit.NoDelay}, tt.give...)...)

			start := time.Now()
			res, err := (&http.Client{Transport: tr}).Get(srv.URL)
			require.NoError(t, err)

			assert.Equal(t, "ok", testkit.ReadAll(t, res))
			assert.Less(t, time.Since(start), 5*time.Second)
			assert.Equal(t, int64(2), srv.Attempts.Load())
		})
	}
}
