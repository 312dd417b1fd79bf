package retryhttp_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed2409de8f/retryhttp"
	"github.com/seed2409de8f/retryhttp/internal/testkit"
	"github.com/seed2409de8f/retryhttp/retryhttptest"
)

// getAll sends n GETs to url through c at once and returns their errors.
func getAll(c *http.Client, url string, n int) []error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := c.Get(url)
			if err == nil {
				res.Body.Close()
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	return errs
}

// The first request to a host the process has not heard from goes alone:
// the requests sent meanwhile reach the server only after its answer.
// Without quota pacing they go at once.
func TestFirstContactGoesAlone(t *testing.T) {
	for _, pace := range []bool{true, false} {
		// The first request is held at the server until another arrives
		// (at most 20 ms with pacing on, where none may, 2 s without).
		hold := 20 * time.Millisecond
		if !pace {
			hold = 2 * time.Second
		}
		var inFirst atomic.Bool
		var first, during atomic.Int32
		arrived := make(chan struct{}, 8)
		srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
			if first.Add(1) == 1 {
				inFirst.Store(true)
				select {
				case <-arrived:
				case <-time.After(hold):
				}
				inFirst.Store(false)
				return
			}
			if inFirst.Load() {
				during.Add(1)
				arrived <- struct{}{}
			}
		}))
		t.Cleanup(srv.Close)
		retryhttp.ForgetContacts() // an earlier server on its port was heard from
		c := &http.Client{Transport: testkit.NewTransport(t, retryhttp.WithQuotaPacing(pace))}
		for _, err := range getAll(c, srv.URL, 8) {
			assert.NoError(t, err)
		}
		if pace {
			assert.Zero(t, during.Load(), "none sent before the first was answered")
		} else {
			assert.Positive(t, during.Load(), "pacing off: sent at once")
		}
	}
}

// A first answer slower than quota.FirstContactWait (100 ms) is not waited
// for: the others go while the first request still hangs.
func TestFirstContactWaitBounded(t *testing.T) {
	hang := make(chan struct{})
	var first atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		if first.CompareAndSwap(false, true) {
			<-hang
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(hang) })
	c := &http.Client{Transport: testkit.NewTransport(t)}
	go func() {
		res, err := c.Get(srv.URL)
		if err == nil {
			res.Body.Close()
		}
	}()
	require.Eventually(t, first.Load, 5*time.Second, time.Millisecond)
	start := time.Now()
	for _, err := range getAll(c, srv.URL, 4) {
		assert.NoError(t, err)
	}
	assert.Less(t, time.Since(start), 2*time.Second, "not held until the first answer")
}

// The point of the gate: a server that states a quota of 3 per hour on
// every response, met by 6 requests at once. The first goes alone, its
// answer says 2 are left: 2 more go, and the last 3, whose wait does not
// fit WithMaxDelay, fail at once without being sent. Without the gate
// all 6 would go blind, and 3 meet a 429.
func TestFirstContactLearnsTheQuotaFirst(t *testing.T) {
	clock := retryhttptest.NewClock(time.Now())
	srv := newQuotaServer(t, clock, 3, time.Hour, "draft-11")
	retryhttp.ForgetContacts() // an earlier server on its port was heard from
	c := &http.Client{Transport: testkit.NewTransport(t, retryhttp.WithClock(clock), retryhttp.WithMaxDelay(time.Minute))}
	waits := 0
	for _, err := range getAll(c, srv.URL, 6) {
		var qe *retryhttp.QuotaWaitError
		if errors.As(err, &qe) {
			waits++
			continue
		}
		assert.NoError(t, err)
	}
	served, denied := srv.counts()
	assert.Equal(t, 3, served)
	assert.Zero(t, denied, "no request met the quota")
	assert.Equal(t, 3, waits)
}
