package retryhttp_test

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"time"

	"github.com/seed2409de8f/retryhttp"
)

// SetOptions gives the requests sent with a context options of their own:
// here, one request that must not wait long is retried once, at once,
// while the transport's other requests keep its three retries.
func ExampleSetOptions() {
	srv, n := exampleFlakyServer(math.MaxInt32, http.StatusServiceUnavailable) // always 503
	defer srv.Close()
	noWait := retryhttp.WithDelayFn(func(retryhttp.Attempt) time.Duration { return 0 })
	tr := retryhttp.New(noWait, retryhttp.WithRetryBudget(nil))
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}

	ctx := retryhttp.SetOptions(context.Background(),
		retryhttp.WithMaxRetries(1), retryhttp.WithAttemptTimeout(200*time.Millisecond))
	for _, ctx := range []context.Context{ctx, context.Background()} {
		n.Store(0)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
		if res, err := client.Do(req); err == nil {
			res.Body.Close()
		}
		fmt.Println("attempts:", n.Load())
	}
	// Output:
	// attempts: 2
	// attempts: 4
}

// WithPolicyFunc gives each class of request a Policy compiled once: here
// the requests marked as batch jobs are never retried, the others follow
// the transport's options.
func ExampleWithPolicyFunc() {
	srv, n := exampleFlakyServer(math.MaxInt32, http.StatusServiceUnavailable) // always 503
	defer srv.Close()
	batch := retryhttp.NewPolicy(retryhttp.WithMaxRetries(0))
	policyOf := func(req *http.Request) *retryhttp.Policy {
		if req.Header.Get("X-Job") == "batch" {
			return batch
		}
		return nil // the transport's options
	}
	tr := retryhttp.New(retryhttp.WithPolicyFunc(policyOf), retryhttp.WithMaxRetries(2),
		retryhttp.WithDelayFn(func(retryhttp.Attempt) time.Duration { return 0 }),
		retryhttp.WithRetryBudget(nil))
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}

	for _, job := range []string{"batch", "interactive"} {
		n.Store(0)
		req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
		req.Header.Set("X-Job", job)
		if res, err := client.Do(req); err == nil {
			res.Body.Close()
		}
		fmt.Println(job, "attempts:", n.Load())
	}
	// Output:
	// batch attempts: 1
	// interactive attempts: 3
}

// NewPolicy compiles request options once; within one Policy a later
// option replaces an earlier one of the same setting, and options that
// configure the Transport itself (here WithTransport) are ignored.
func ExampleNewPolicy() {
	srv, n := exampleFlakyServer(math.MaxInt32, http.StatusServiceUnavailable) // always 503
	defer srv.Close()
	p := retryhttp.NewPolicy(retryhttp.WithMaxRetries(5), retryhttp.WithMaxRetries(1),
		retryhttp.WithTransport(nil))
	tr := retryhttp.New(retryhttp.WithPolicyFunc(func(*http.Request) *retryhttp.Policy { return p }),
		retryhttp.WithDelayFn(func(retryhttp.Attempt) time.Duration { return 0 }),
		retryhttp.WithRetryBudget(nil))
	defer tr.CloseIdleConnections()

	res, err := (&http.Client{Transport: tr}).Get(srv.URL)
	if err == nil {
		res.Body.Close()
	}
	fmt.Println("attempts:", n.Load())
	// Output:
	// attempts: 2
}
