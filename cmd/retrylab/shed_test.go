package main

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestWorkerPoolAbandonsOnlyQueued checks the shed scenario's accounting at
// the end of a run: a request that finds a worker free is worked on, even
// once the run has ended; one that would have to queue is abandoned.
func TestWorkerPoolAbandonsOnlyQueued(t *testing.T) {
	for range 20 { // both cases were once picked at random
		p := &workerPool{slots: make(chan struct{}, 1), work: time.Microsecond, quit: make(chan struct{})}
		close(p.quit)
		rec := httptest.NewRecorder()
		p.serve(rec, httptest.NewRequest(http.MethodGet, "/", nil))
		assert.Equal(t, http.StatusOK, rec.Code)
		assert.EqualValues(t, 1, p.useful.Load())
		assert.Zero(t, p.abandoned.Load())

		p.slots <- struct{}{} // the only worker is busy
		p.serve(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/", nil))
		assert.EqualValues(t, 1, p.abandoned.Load())
	}
}
