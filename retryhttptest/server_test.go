package retryhttptest_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/seed2409de8f/retryhttp"
	"github.com/seed2409de8f/retryhttp/retryhttptest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// client returns a client whose transport is tr, closing its idle
// connections when the test ends.
func client(t *testing.T, tr *retryhttp.Transport) *http.Client {
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// get sends a GET to url and returns the status, or fails the test.
func get(t *testing.T, c *http.Client, url string) int {
	t.Helper()
	res, err := c.Get(url)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res.StatusCode
}

func TestFailThenSucceedWithFakeClock(t *testing.T) {
	srv := retryhttptest.FailThenSucceed(t, 2, http.StatusServiceUnavailable)
	clock := retryhttptest.NewClock(time.Unix(0, 0))
	c := client(t, retryhttp.New(retryhttp.WithClock(clock)))

	assert.Equal(t, http.StatusOK, get(t, c, srv.URL))
	assert.Equal(t, 3, srv.Requests())
	sleeps := clock.Sleeps()
	require.Len(t, sleeps, 2)
	// The default backoff: below 250ms, then below 500ms.
	assert.Less(t, sleeps[0], 250*time.Millisecond)
	assert.Less(t, sleeps[1], 500*time.Millisecond)
	assert.Equal(t, sleeps[0]+sleeps[1], clock.Slept())
	assert.Equal(t, time.Unix(0, 0).Add(clock.Slept()), clock.Now())

	got := srv.Received()
	require.Len(t, got, 3)
	assert.Equal(t, "", got[0].Header.Get(retryhttp.AttemptHeader))
	assert.Equal(t, "3", got[2].Header.Get(retryhttp.AttemptHeader))
	assert.Equal(t, http.MethodGet, got[2].Method)
}

func TestTooManyRequests(t *testing.T) {
	srv := retryhttptest.NewServer(t, retryhttptest.TooManyRequests(1500*time.Millisecond), retryhttptest.Status(http.StatusOK))
	clock := retryhttptest.NewClock(time.Unix(0, 0))
	c := client(t, retryhttp.New(retryhttp.WithClock(clock)))

	assert.Equal(t, http.StatusOK, get(t, c, srv.URL))
	require.Len(t, clock.Sleeps(), 1)
	// Retry-After: 2 (1.5s rounded up), moved by up to a third.
	assert.GreaterOrEqual(t, clock.Sleeps()[0], 4*time.Second/3)
	assert.LessOrEqual(t, clock.Sleeps()[0], 8*time.Second/3)
}

func TestReset(t *testing.T) {
	srv := retryhttptest.NewServer(t, retryhttptest.Reset(), retryhttptest.Status(http.StatusOK))

	// Without retries, the client sees the reset.
	tr := retryhttp.New(retryhttp.WithMaxRetries(0))
	_, err := client(t, tr).Get(srv.URL)
	require.Error(t, err)
	assert.True(t, errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.EOF), "got %v", err)

	// With them, the GET is sent again and succeeds.
	clock := retryhttptest.NewClock(time.Unix(0, 0))
	assert.Equal(t, http.StatusOK, get(t, client(t, retryhttp.New(retryhttp.WithClock(clock))), srv.URL))
	assert.Equal(t, 2, srv.Requests())
}

func TestHangEndsWithTheAttempt(t *testing.T) {
	srv := retryhttptest.NewServer(t, retryhttptest.Hang(), retryhttptest.Status(http.StatusOK))
	clock := retryhttptest.NewClock(time.Unix(0, 0))
	c := client(t, retryhttp.New(retryhttp.WithClock(clock), retryhttp.WithAttemptTimeout(20*time.Millisecond)))

	// The attempt timeout runs on the clock: it passes when the test moves
	// the time past it.
	status := make(chan int, 1)
	go func() { status <- get(t, c, srv.URL) }()
	require.Eventually(t, func() bool { return srv.Requests() == 1 && clock.Timers() == 1 }, 10*time.Second, time.Millisecond)
	clock.Advance(20 * time.Millisecond)
	assert.Equal(t, http.StatusOK, <-status)
	assert.Equal(t, 2, srv.Requests())
}

func TestHangEndsWhenTheServerCloses(t *testing.T) {
	srv := retryhttptest.NewServer(nil, retryhttptest.Hang())
	tr := retryhttp.New(retryhttp.WithMaxRetries(0))
	c := client(t, tr)
	done := make(chan error, 1)
	go func() {
		res, err := c.Get(srv.URL)
		if res != nil {
			res.Body.Close()
		}
		done <- err
	}()
	for srv.Requests() == 0 {
		time.Sleep(time.Millisecond)
	}
	srv.Close() // returns once the hanging handler has
	srv.Close() // and again is harmless
	assert.Error(t, <-done)
}

func TestNilStepAndNoSteps(t *testing.T) {
	for _, steps := range [][]retryhttptest.Step{nil, {nil}} {
		srv := retryhttptest.NewServer(t, steps...)
		assert.Equal(t, http.StatusOK, get(t, client(t, retryhttp.New()), srv.URL))
	}
}

func TestStatusHeaders(t *testing.T) {
	srv := retryhttptest.NewServer(t, retryhttptest.Status(http.StatusTeapot, "X-A", "1", "X-A", "2", "X-Odd"))
	res, err := client(t, retryhttp.New()).Get(srv.URL)
	require.NoError(t, err)
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	assert.Equal(t, http.StatusTeapot, res.StatusCode)
	assert.Equal(t, []string{"1", "2"}, res.Header.Values("X-A"))
	assert.Empty(t, res.Header.Values("X-Odd"))
	assert.Equal(t, "I'm a teapot", string(body))
}

// TestClockCountsAgainstTheDeadline checks that the waits the fake clock
// skips still count against the request's deadline: the transport stops
// instead of sleeping past it.
func TestClockCountsAgainstTheDeadline(t *testing.T) {
	srv := retryhttptest.NewServer(t, retryhttptest.TooManyRequests(20*time.Second))
	clock := retryhttptest.NewClock(time.Now())
	var stop retryhttp.StopReason
	exact := retryhttp.CustomizedDelayFn(retryhttp.CustomizedDelayFnOptions{JitterMagnitude: -1})
	// The budget reads the same clock: the retries of a 429 wait in its
	// pause lane, paced on the budget's clock.
	b := retryhttp.NewRetryBudget(retryhttp.RetryBudgetOptions{Clock: clock})
	c := client(t, retryhttp.New(retryhttp.WithClock(clock), retryhttp.WithRetryBudget(b), retryhttp.WithDelayFn(exact), retryhttp.WithHooks(retryhttp.Hooks{OnRetryDecision: func(d retryhttp.Decision) {
		if !d.Retry {
			stop = d.Reason
		}
	}})))
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	res, err := c.Do(req)
	require.NoError(t, err)
	res.Body.Close()
	assert.Equal(t, http.StatusTooManyRequests, res.StatusCode)
	assert.Equal(t, retryhttp.StopDeadline, stop)
	// Two waits of 20s fit before the deadline, a third would not.
	assert.Equal(t, []time.Duration{20 * time.Second, 20 * time.Second}, clock.Sleeps())
	assert.Equal(t, 3, srv.Requests())
}

// Regression: Received shared its header maps with the server's record, so
// a caller that edited one changed the next Received, and raced with it.
func TestReceivedReturnsRealCopies(t *testing.T) {
	srv := retryhttptest.NewServer(t)
	req, err := http.NewRequest(http.MethodGet, srv.URL, nil)
	require.NoError(t, err)
	req.Header.Set("X-Test", "sent")
	res, err := srv.Client().Do(req)
	require.NoError(t, err)
	res.Body.Close()

	first := srv.Received()
	require.Len(t, first, 1)
	done := make(chan struct{})
	go func() { // a second reader at the same time: -race sees any sharing
		defer close(done)
		for i := 0; i < 100; i++ {
			_ = srv.Received()[0].Header.Get("X-Test")
		}
	}()
	first[0].Header.Set("X-Test", "edited")
	first[0].Header.Set("X-Added", "yes")
	first[0].Method = "EDITED"
	<-done

	again := srv.Received()
	assert.Equal(t, "sent", again[0].Header.Get("X-Test"))
	assert.Empty(t, again[0].Header.Get("X-Added"))
	assert.Equal(t, http.MethodGet, again[0].Method)
}
