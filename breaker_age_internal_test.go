package retryhttp

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/seed2409de8f/retryhttp/internal/hostmap"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The closed circuit's allow reads the age of its phase with ageNow: on the
// real clock from the monotonic clock alone (time.Since), otherwise from the
// Transport's clock. These tests check that both give the age that
// age(p, now) gives, and that successes counted concurrently on the real
// clock land in the window.

func TestBreakerAgeNowOnTheRealClock(t *testing.T) {
	b := newBreakers(CircuitBreakerSettings{Window: 10 * time.Second}, &Transport{}) // periods of 1s
	require.Equal(t, time.Second, b.period)

	p := b.newPhase(CircuitClosed, time.Now().Add(-25*time.Second-500*time.Millisecond))
	before := b.age(p, time.Now())
	got := b.ageNow(p)
	after := b.age(p, time.Now())
	assert.Equal(t, uint64(25), before)
	assert.True(t, before <= got && got <= after, "age %d outside [%d, %d]", got, before, after)

	// A start without a monotonic reading is compared on the wall clock.
	wall := b.newPhase(CircuitClosed, time.Now().Add(-7*time.Second-500*time.Millisecond).Round(0))
	assert.Equal(t, uint64(7), b.ageNow(wall))

	// A phase that starts later than now has age 0, as with age.
	future := b.newPhase(CircuitClosed, time.Now().Add(time.Hour))
	assert.Equal(t, uint64(0), b.ageNow(future))
	assert.Equal(t, uint64(0), b.age(future, time.Now()))
}

func TestBreakerAgeNowFollowsTheTransportClock(t *testing.T) {
	start := time.Date(2026, 11, 23, 4, 0, 0, 0, time.UTC)
	for name, clock := range map[string]func(*Transport, time.Time) func(time.Duration){
		"WithClock": func(tr *Transport, at time.Time) func(time.Duration) {
			c := newStepClock(at)
			WithClock(c)(tr)
			return c.Advance
		},
	} {
		t.Run(name, func(t *testing.T) {
			tr := &Transport{}
			b := newBreakers(CircuitBreakerSettings{Window: 10 * time.Second}, tr)
			advance := clock(tr, start) // after WithCircuitBreaker: the order does not matter
			p := b.newPhase(CircuitClosed, start)
			assert.Equal(t, uint64(0), b.ageNow(p))
			advance(37*time.Second + time.Millisecond)
			assert.Equal(t, uint64(37), b.ageNow(p))
			assert.Equal(t, b.age(p, b.now()), b.ageNow(p))
		})
	}
}

func TestBreakerCountsConcurrentSuccessesOnTheRealClock(t *testing.T) {
	b := newBreakers(CircuitBreakerSettings{}, &Transport{})
	req, err := http.NewRequest(http.MethodGet, "http://example.test/", nil)
	require.NoError(t, err)
	const goroutines, each = 8, 200
	var wg sync.WaitGroup
	for range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				tk, err := b.allow(req)
				if !assert.NoError(t, err) {
					return
				}
				b.done(tk, req, &http.Response{StatusCode: http.StatusOK}, nil)
			}
		}()
	}
	wg.Wait()

	c, ok := b.hosts.Get(hostmap.KeyOf(req))
	require.True(t, ok)
	p := c.phase.Load()
	require.Equal(t, CircuitClosed, p.state)
	var successes, failures uint64
	for i := range p.window {
		if k := p.window[i].Load(); k != nil {
			assert.LessOrEqual(t, k.age, b.ageNow(p), "a bucket of an age to come")
			successes += k.successes.Load()
			failures += k.failures.Load()
		}
	}
	assert.EqualValues(t, goroutines*each, successes, "every success counted")
	assert.Zero(t, failures)
	last := p.lastAllow.Load()
	require.NotZero(t, last, "requests were allowed")
	assert.LessOrEqual(t, last-1, b.ageNow(p), "the last request allowed is of an age past")
	assert.False(t, c.Idle(), "a circuit used within its window is not idle")
}

// TestBreakerDoneCountsAsSampleSays gives a closed circuit every kind of
// outcome and checks that done counts it as sample classifies it: a
// success, a failure, or nothing (excluded). done takes a short cut for a
// success; this is what keeps the two in step.
func TestBreakerDoneCountsAsSampleSays(t *testing.T) {
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel2()
	contexts := map[string]context.Context{"live": context.Background(), "canceled": canceled, "expired": expired}
	errs := map[string]error{"none": nil, "reset": errors.New("reset"), "body": ErrBufferingBody}
	for cname, ctx := range contexts {
		for ename, err := range errs {
			for _, code := range []int{200, 204, 404, 429, 500, 503} {
				// MinRequests out of reach: the circuit stays closed.
				b := newBreakers(CircuitBreakerSettings{MinRequests: 1 << 30}, &Transport{})
				req, rerr := http.NewRequestWithContext(ctx, http.MethodGet, "http://example.test/", nil)
				require.NoError(t, rerr)
				var res *http.Response
				if err == nil {
					res = &http.Response{StatusCode: code}
				}
				tk, aerr := b.allow(req)
				require.NoError(t, aerr)
				b.done(tk, req, res, err)

				var successes, failures uint64
				for i := range tk.p.window {
					if k := tk.p.window[i].Load(); k != nil {
						successes += k.successes.Load()
						failures += k.failures.Load()
					}
				}
				var want [2]uint64
				switch sample(ctx, res, err) {
				case nil:
					want[0] = 1
				case errSampleFailed:
					want[1] = 1
				}
				assert.Equal(t, want, [2]uint64{successes, failures}, "ctx %s, error %s, status %d", cname, ename, code)
				assert.Same(t, tk.p, tk.c.phase.Load(), "closed all along")
			}
		}
	}
}
