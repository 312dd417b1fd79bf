package retryhttp_test

import (
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/seed2409de8f/retryhttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// stackOf returns the stack of the calling goroutine.
func stackOf() string {
	buf := make([]byte, 64<<10)
	return string(buf[:runtime.Stack(buf, false)])
}

// hedgeGoroutines counts the goroutines running code of the hedged path
// other than RoundTrip's own: attempts sent in parallel, the coordinator.
func hedgeGoroutines() int {
	return strings.Count(allStacks(), "retryhttp.(*hedge)")
}

// seeingTransport answers 200 in memory, recording, for each attempt,
// whether it runs on the goroutine of the test and how many goroutines of
// the hedged path are running meanwhile.
type seeingTransport struct {
	test    string // the test function's name, in the caller's stack
	onTest  []bool
	hedging []int
}

func (s *seeingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	s.onTest = append(s.onTest, strings.Contains(stackOf(), s.test))
	s.hedging = append(s.hedging, hedgeGoroutines())
	return memTransport{}.RoundTrip(req)
}

// TestHedgeFirstAttemptOnCallersGoroutine checks that a hedged request
// whose hedge delay does not pass sends its only attempt on the caller's
// goroutine, with no other goroutine of the hedged path.
func TestHedgeFirstAttemptOnCallersGoroutine(t *testing.T) {
	base := &seeingTransport{test: "TestHedgeFirstAttemptOnCallersGoroutine"}
	var decisions []retryhttp.Decision
	tr := retryhttp.New(retryhttp.WithTransport(base), retryhttp.WithHedging(time.Hour, 2),
		retryhttp.WithHooks(retryhttp.Hooks{OnRetryDecision: func(d retryhttp.Decision) { decisions = append(decisions, d) }}))
	for range 3 {
		req, err := http.NewRequest(http.MethodGet, "http://example.test/", nil)
		require.NoError(t, err)
		res, err := tr.RoundTrip(req)
		require.NoError(t, err)
		require.NoError(t, res.Body.Close())
	}
	assert.Equal(t, []bool{true, true, true}, base.onTest, "attempts on the caller's goroutine")
	assert.Equal(t, []int{0, 0, 0}, base.hedging, "goroutines of the hedged path during attempt 1")
	require.Len(t, decisions, 3)
	for _, d := range decisions {
		assert.Equal(t, retryhttp.StopSuccess, d.Reason)
		assert.Equal(t, 1, d.Attempt.Count)
	}
}

// panicFirst panics in attempt 1 once a hedge has been sent, and answers
// the hedges.
type panicFirst struct{ hedged chan struct{} }

func (p *panicFirst) RoundTrip(req *http.Request) (*http.Response, error) {
	if retryhttp.AttemptFromRequest(req) == 1 {
		<-p.hedged
		panic("base transport")
	}
	close(p.hedged)
	<-req.Context().Done() // the hedge is still in flight when attempt 1 panics
	return nil, req.Context().Err()
}

// TestHedgeFirstAttemptPanicReachesCaller checks that a panic of the base
// transport in attempt 1, on the caller's goroutine, goes up to the caller
// of RoundTrip once the hedge sent meanwhile has been ended: no goroutine
// is left waiting for attempt 1 (goleak, TestMain).
func TestHedgeFirstAttemptPanicReachesCaller(t *testing.T) {
	tr := retryhttp.New(retryhttp.WithTransport(&panicFirst{hedged: make(chan struct{})}),
		retryhttp.WithHedging(time.Millisecond, 1))
	req, err := http.NewRequest(http.MethodGet, "http://example.test/", nil)
	require.NoError(t, err)
	assert.PanicsWithValue(t, "base transport", func() { _, _ = tr.RoundTrip(req) })
	assert.Eventually(t, func() bool { return hedgeGoroutines() == 0 }, time.Second, time.Millisecond, allStacks())
}
