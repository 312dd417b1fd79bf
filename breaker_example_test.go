package retryhttp_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"time"

	"github.com/seed2409de8f/retryhttp"
)

// A circuit breaker that opens after 2 failed requests out of 2: the third
// request fails at once with ErrCircuitOpen, without reaching the backend.
// After OpenTimeout (an hour here) it would let probes through.
func ExampleWithCircuitBreaker() {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()

	tr := retryhttp.New(
		retryhttp.WithMaxRetries(0),
		retryhttp.WithCircuitBreaker(retryhttp.CircuitBreakerSettings{
			MinRequests: 2,
			OpenTimeout: time.Hour,
			OnStateChange: func(_ string, from, to retryhttp.CircuitState) {
				fmt.Printf("circuit: %s -> %s\n", from, to)
			},
		}),
	)
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}

	for i := 1; i <= 3; i++ {
		res, err := client.Get(srv.URL)
		switch {
		case errors.Is(err, retryhttp.ErrCircuitOpen):
			fmt.Printf("request %d: failed fast, ErrCircuitOpen\n", i)
		case err != nil:
			fmt.Println(err)
		default:
			res.Body.Close()
			fmt.Printf("request %d: %d\n", i, res.StatusCode)
		}
	}
	fmt.Println("backend hits:", hits.Load())
	// Output:
	// request 1: 503
	// circuit: closed -> open
	// request 2: 503
	// request 3: failed fast, ErrCircuitOpen
	// backend hits: 2
}
