package retryhttp_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"time"

	"github.com/seed2409de8f/retryhttp"
)

// With WithCustomizedShouldRetryFn the transport's own guess of which
// requests are idempotent follows the policy's methods too: here only GET,
// so a slow GET is hedged and a slow DELETE is not. (The same function
// passed to WithShouldRetryFn decides the same retries, but the guess would
// follow the default methods, which include DELETE.)
func ExampleWithCustomizedShouldRetryFn() {
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		time.Sleep(200 * time.Millisecond) // slower than the hedge delay
	}))
	defer srv.Close()
	tr := retryhttp.New(
		retryhttp.WithCustomizedShouldRetryFn(retryhttp.CustomizedShouldRetryFnOptions{
			IdempotentMethods: []string{http.MethodGet},
		}),
		retryhttp.WithHedging(20*time.Millisecond, 1),
	)
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}

	for _, method := range []string{http.MethodGet, http.MethodDelete} {
		requests.Store(0)
		req, _ := http.NewRequest(method, srv.URL, nil)
		res, err := client.Do(req)
		if err != nil {
			fmt.Println(err)
			return
		}
		res.Body.Close()
		time.Sleep(250 * time.Millisecond) // a hedge that lost still reaches the server
		fmt.Println(method, "requests at the server:", requests.Load())
	}
	// Output:
	// GET requests at the server: 2
	// DELETE requests at the server: 1
}

// SetOptions with WithCustomizedShouldRetryFn does the same for the
// requests sent with its context only.
func ExampleSetOptions_customizedShouldRetryFn() {
	ctx := retryhttp.SetOptions(context.Background(), retryhttp.WithCustomizedShouldRetryFn(retryhttp.CustomizedShouldRetryFnOptions{
		IdempotentMethods: []string{http.MethodGet, http.MethodHead},
	}))
	req, _ := http.NewRequestWithContext(ctx, http.MethodDelete, "https://example.com/item/1", nil)
	_ = req // sent through a retryhttp Transport: a DELETE answered 503 is not retried
}

// SetOptions with WithAdaptiveHedging turns hedging with a delay that
// follows the host's latency on for the requests sent with its context
// only: here the 93rd percentile of the host's recent successful first
// attempts, one hedge.
func ExampleSetOptions_adaptiveHedging() {
	ctx := retryhttp.SetOptions(context.Background(), retryhttp.WithAdaptiveHedging(0.93, 1))
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://example.com/search?q=x", nil)
	_ = req // sent through a retryhttp Transport
}
