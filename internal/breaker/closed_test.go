package breaker

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestBreakerClosedPathTakesNoLock lets requests through a closed circuit
// and counts their successes while another goroutine holds the circuit's
// mutex: were the closed path to take it, they would wait for ever.
func TestBreakerClosedPathTakesNoLock(t *testing.T) {
	b := New(Config{}, nil)
	req := exampleRequest(t)
	first := allow(t, b, req) // makes the destination's circuit
	c := first.c
	c.mu.Lock()
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		for range 100 {
			tk, ok, _ := b.Allow(req)
			if !assert.True(t, ok) {
				return
			}
			b.Done(tk, Success)
		}
	}()
	select {
	case <-finished:
	case <-time.After(time.Minute):
		t.Fatal("the closed path waits for the circuit's lock")
	}
	c.mu.Unlock()
	b.Done(first, Success)

	p := c.phase.Load()
	assert.Equal(t, Closed, p.state)
	var successes uint64
	for i := range p.window {
		if k := p.window[i].Load(); k != nil {
			successes += k.successes.Load()
		}
	}
	assert.EqualValues(t, 101, successes, "every success counted")
}
