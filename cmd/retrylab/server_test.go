package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestServerCloseWaitsForHandlers checks the lab server's shutdown: close
// waits for a handler that is running, and a handler that starts once close
// has begun (as one net/http had already started may) touches neither the
// counts nor the handler, which the scenarios read once close returns.
func TestServerCloseWaitsForHandlers(t *testing.T) {
	var calls, finished atomic.Int32
	h := func(w http.ResponseWriter, r *http.Request) int {
		calls.Add(1)
		<-r.Context().Done()              // until close ends the connection
		time.Sleep(20 * time.Millisecond) // and a little more
		finished.Add(1)
		return 0
	}
	srv, err := startServer(h, time.Now(), time.Hour, 1)
	require.NoError(t, err)
	base := newBase()
	defer base.CloseIdleConnections()
	errc := make(chan error, 1)
	go func() { errc <- get(context.Background(), &http.Client{Transport: base}, srv.URL) }()
	require.Eventually(t, func() bool { return calls.Load() == 1 }, 10*time.Second, time.Millisecond)

	srv.close()
	assert.EqualValues(t, 1, finished.Load(), "close returned before the running handler")
	assert.Error(t, <-errc)

	// A handler that starts after close.
	rec := httptest.NewRecorder()
	gone, cancel := context.WithCancel(context.Background())
	cancel() // so that h, if called, returns
	srv.srv.Handler.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil).WithContext(gone))
	assert.Equal(t, http.StatusServiceUnavailable, rec.Code)
	assert.EqualValues(t, 1, calls.Load(), "a handler ran after close")
	assert.EqualValues(t, 1, srv.requests.Load(), "a request was counted after close")
	srv.close() // a second close is harmless
}
