package retryhttp

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBreakerClosedPathTakesNoLock lets requests through a closed circuit
// and counts their successes while another goroutine holds the circuit's
// mutex: were the closed path to take it, they would wait for ever.
func TestBreakerClosedPathTakesNoLock(t *testing.T) {
	b := newBreakers(CircuitBreakerSettings{}, &Transport{})
	req, err := http.NewRequest(http.MethodGet, "http://example.test/", nil)
	require.NoError(t, err)
	first, err := b.allow(req) // makes the destination's circuit
	require.NoError(t, err)
	c := first.c
	c.mu.Lock()
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		for range 100 {
			tk, err := b.allow(req)
			if !assert.NoError(t, err) {
				return
			}
			b.done(tk, req, &http.Response{StatusCode: http.StatusOK}, nil)
		}
	}()
	select {
	case <-finished:
	case <-time.After(time.Minute):
		t.Fatal("the closed path waits for the circuit's lock")
	}
	c.mu.Unlock()
	b.done(first, req, &http.Response{StatusCode: http.StatusOK}, nil)

	p := c.phase.Load()
	assert.Equal(t, CircuitClosed, p.state)
	var successes uint64
	for i := range p.window {
		if k := p.window[i].Load(); k != nil {
			successes += k.successes.Load()
		}
	}
	assert.EqualValues(t, 101, successes, "every success counted")
}
