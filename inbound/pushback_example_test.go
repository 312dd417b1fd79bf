package inbound_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"time"

	"github.com/seed2409de8f/retryhttp"
	"github.com/seed2409de8f/retryhttp/inbound"
)

// A service wraps its handler with Pushback. When its call to a backend
// gives up and it passes the failure on, its callers are told not to retry:
// the backend sees the retries of one hop only.
func ExamplePushback() {
	var backendHits atomic.Int32
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		backendHits.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer backend.Close()

	noWait := retryhttp.WithDelayFn(func(retryhttp.Attempt) time.Duration { return 0 })
	outbound := retryhttp.New(noWait)
	defer outbound.CloseIdleConnections()
	service := httptest.NewServer(inbound.Pushback(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The outbound request carries the inbound request's context.
		req, _ := http.NewRequestWithContext(r.Context(), http.MethodGet, backend.URL, nil)
		res, err := outbound.RoundTrip(req)
		if err != nil {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		res.Body.Close()
		w.WriteHeader(res.StatusCode) // passes the failure on
	})))
	defer service.Close()

	client := retryhttp.New(noWait)
	defer client.CloseIdleConnections()
	res, err := (&http.Client{Transport: client}).Get(service.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	res.Body.Close()
	fmt.Println(res.StatusCode, res.Header.Get(retryhttp.RetrySignalHeader))
	fmt.Println("backend requests:", backendHits.Load())
	// Output:
	// 503 no-retry
	// backend requests: 4
}
