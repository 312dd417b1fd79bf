package breaker

import (
	"sync"
	"testing"
	"time"

	"github.com/seed2409de8f/retryhttp/internal/hostmap"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The closed circuit's allow reads the age of its phase with ageNow: on the
// real clock from the monotonic clock alone (time.Since), otherwise from the
// clock given to New. These tests check that both give the age that
// age(p, now) gives, and that successes counted concurrently on the real
// clock land in the window.

func TestBreakerAgeNowOnTheRealClock(t *testing.T) {
	b := New(Config{Window: 10 * time.Second}, nil) // periods of 1s
	require.Equal(t, time.Second, b.period)

	p := b.newPhase(Closed, time.Now().Add(-25*time.Second-500*time.Millisecond))
	before := b.age(p, time.Now())
	got := b.ageNow(p)
	after := b.age(p, time.Now())
	assert.Equal(t, uint64(25), before)
	assert.True(t, before <= got && got <= after, "age %d outside [%d, %d]", got, before, after)

	// A start without a monotonic reading is compared on the wall clock.
	wall := b.newPhase(Closed, time.Now().Add(-7*time.Second-500*time.Millisecond).Round(0))
	assert.Equal(t, uint64(7), b.ageNow(wall))

	// A phase that starts later than now has age 0, as with age.
	future := b.newPhase(Closed, time.Now().Add(time.Hour))
	assert.Equal(t, uint64(0), b.ageNow(future))
	assert.Equal(t, uint64(0), b.age(future, time.Now()))
}

func TestBreakerAgeNowFollowsTheClock(t *testing.T) {
	start := time.Date(2026, 11, 23, 4, 0, 0, 0, time.UTC)
	b := New(Config{Window: 10 * time.Second}, nil)
	c := &manualClock{at: start}
	b.SetClock(c) // after New: the order of WithClock and WithCircuitBreaker does not matter
	p := b.newPhase(Closed, start)
	assert.Equal(t, uint64(0), b.ageNow(p))
	c.advance(37*time.Second + time.Millisecond)
	assert.Equal(t, uint64(37), b.ageNow(p))
	assert.Equal(t, b.age(p, b.now()), b.ageNow(p))
}

func TestBreakerCountsConcurrentSuccessesOnTheRealClock(t *testing.T) {
	b := New(Config{}, nil)
	req := exampleRequest(t)
	const goroutines, each = 8, 200
	var wg sync.WaitGroup
	for range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				tk, ok, _ := b.Allow(req)
				if !assert.True(t, ok) {
					return
				}
				b.Done(tk, Success)
			}
		}()
	}
	wg.Wait()

	c, ok := b.hosts.Get(hostmap.KeyOf(req))
	require.True(t, ok)
	p := c.phase.Load()
	require.Equal(t, Closed, p.state)
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
// sample and checks that Done counts it: a success, a failure, or nothing
// (excluded). Done takes a short cut for a success and an excluded
// outcome; this is what keeps it in step with the locked path.
func TestBreakerDoneCountsAsSampleSays(t *testing.T) {
	tests := []struct {
		give Sample
		want [2]uint64 // successes, failures
	}{
		{give: Success, want: [2]uint64{1, 0}},
		{give: Failure, want: [2]uint64{0, 1}},
		{give: Excluded, want: [2]uint64{0, 0}},
	}
	for _, tt := range tests {
		// MinRequests out of reach: the circuit stays closed.
		s := New(Config{MinRequests: 1 << 30}, nil)
		tk := allow(t, s, exampleRequest(t))
		s.Done(tk, tt.give)

		var successes, failures uint64
		for i := range tk.p.window {
			if k := tk.p.window[i].Load(); k != nil {
				successes += k.successes.Load()
				failures += k.failures.Load()
			}
		}
		assert.Equal(t, tt.want, [2]uint64{successes, failures}, "sample %d", tt.give)
		assert.Same(t, tk.p, tk.c.phase.Load(), "closed all along")
	}
}
