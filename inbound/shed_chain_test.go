package inbound_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed2409de8f/retryhttp"
	"github.com/seed2409de8f/retryhttp/inbound"
	"github.com/seed2409de8f/retryhttp/retryhttptest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLoadShedderOneHopUpRetries: a shed request was never processed, so
// the caller directly above retries it after the Retry-After, whatever its
// method: a POST without an idempotency key the server honours is retried
// too, and succeeds once a slot is free.
func TestLoadShedderOneHopUpRetries(t *testing.T) {
	s := inbound.NewLoadShedder(inbound.LoadShedderOptions{Limit: 1, RetryAfter: 2 * time.Second})
	g := newGate()
	var bodies atomic.Int64
	srv := shedServer(t, s, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if b, _ := io.ReadAll(r.Body); string(b) == "order" {
			bodies.Add(1)
		}
		g.ServeHTTP(w, r)
	}))
	held := occupy(t, plainClient(t), srv.URL, g, 1)

	// The wait the default policy chooses is checked, then replaced by
	// waiting for the slot to be free; the stated pause, which the
	// transport waits in full, passes on a fake clock, so that the test
	// does not sleep.
	var chosen atomic.Int64
	tr := retryhttp.New(retryhttp.WithDelayFn(func(a retryhttp.Attempt) time.Duration {
		chosen.Store(int64(retryhttp.DefaultDelayFn(a)))
		g.open()
		<-held[0]
		return 0
	}), retryhttp.WithClock(retryhttptest.NewClock(time.Now())))
	t.Cleanup(tr.CloseIdleConnections)
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/fast", strings.NewReader("order"))
	require.NoError(t, err)
	res, err := (&http.Client{Transport: tr}).Do(req)
	require.NoError(t, err)
	res.Body.Close()

	assert.Equal(t, http.StatusOK, res.StatusCode)
	// Retry-After 2, 3 or 4 (2s, jitter 1), moved by up to ±1/3 by the
	// client.
	assert.GreaterOrEqual(t, time.Duration(chosen.Load()), 2*time.Second*2/3)
	assert.LessOrEqual(t, time.Duration(chosen.Load()), 4*time.Second*4/3)
	assert.Equal(t, inbound.LoadShedderStats{Limit: 1, Admitted: 2, Shed: 1}, s.Stats())
	assert.Equal(t, int64(1), bodies.Load(), "the shed attempt was never read: the handler saw one order")
}

// TestLoadShedderTwoHopsUpDoNotRetry checks the chain A → B → C where C
// sheds everything (its one slot is held): B's Transport retries C (the hop
// directly above), gives up, and B answers 503. With Pushback on B, that
// answer carries Retry-Pushback: no-retry, and A does not retry it: C sees
// 1 + 3 requests. Without Pushback, A retries B, B retries C each time,
// and C sees them multiplied, within B's retry budget (10 retries).
func TestLoadShedderTwoHopsUpDoNotRetry(t *testing.T) {
	tests := []struct {
		name       string
		pushback   bool
		wantB      int64
		wantC      uint64
		wantSignal bool
	}{
		{"B wrapped in Pushback", true, 1, 4, true},
		// A: 4 attempts. B: 1 + 3, 1 + 3, 1 + 3, then 1 + 1 when its
		// budget's 10 retries are spent.
		{"B without Pushback", false, 4, 14, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			shedder := inbound.NewLoadShedder(inbound.LoadShedderOptions{Limit: 1})
			g := newGate()
			c := shedServer(t, shedder, g)
			held := occupy(t, plainClient(t), c.URL, g, 1)
			t.Cleanup(func() { g.open(); <-held[0] })

			// Budgets of their own, parking off: the counts are the
			// buckets' (budget_test.go and park_test.go test parking).
			toC := retryhttp.New(noDelay(), noParking())
			t.Cleanup(toC.CloseIdleConnections)
			var hitsB atomic.Int64
			var b http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				hitsB.Add(1)
				req, _ := http.NewRequestWithContext(r.Context(), http.MethodGet, c.URL+"/fast", nil)
				res, err := toC.RoundTrip(req)
				if err != nil {
					w.WriteHeader(http.StatusBadGateway)
					return
				}
				defer res.Body.Close()
				// Pass the failure on as a proxy does, headers included.
				w.Header().Set("Retry-After", res.Header.Get("Retry-After"))
				w.WriteHeader(res.StatusCode)
			})
			if tt.pushback {
				b = inbound.Pushback(b)
			}
			srvB := httptest.NewServer(b)
			t.Cleanup(srvB.Close)

			toB := retryhttp.New(noDelay(), noParking())
			t.Cleanup(toB.CloseIdleConnections)
			res, err := (&http.Client{Transport: toB}).Get(srvB.URL)
			require.NoError(t, err)
			res.Body.Close()

			assert.Equal(t, http.StatusServiceUnavailable, res.StatusCode)
			assert.Equal(t, tt.wantSignal, retryhttp.HasRetrySignal(res.Header))
			assert.NotEmpty(t, res.Header.Get("Retry-After"))
			assert.Equal(t, tt.wantB, hitsB.Load(), "requests at B")
			assert.Equal(t, tt.wantC, shedder.Stats().Shed, "requests shed at C")
		})
	}
}

// noDelay retries without waiting: its DelayFn says 0, and the pause a
// shed answer states (Retry-After), which the transport waits in full,
// passes on a fake clock.
func noDelay() retryhttp.Option {
	c := retryhttptest.NewClock(time.Now())
	return func(t *retryhttp.Transport) {
		retryhttp.WithDelayFn(func(retryhttp.Attempt) time.Duration { return 0 })(t)
		retryhttp.WithClock(c)(t)
	}
}

// noParking is a budget of its own with parking off: the token bucket alone.
func noParking() retryhttp.Option {
	return retryhttp.WithRetryBudget(retryhttp.NewRetryBudget(retryhttp.RetryBudgetOptions{NoParking: true}))
}
