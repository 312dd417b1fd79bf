package retryhttp_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"time"

	"github.com/seed2409de8f/retryhttp"
	"github.com/seed2409de8f/retryhttp/retryhttptest"
)

// A retry budget of its own, small enough to see it run out: against a
// backend that fails every request, the first request spends the budget's
// 2 tokens on 2 retries, and the next ones get no retry at all (parking is
// off here, so a refused retry is not waited for). Without the budget, every
// request would be sent 4 times.
func ExampleWithRetryBudget() {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()

	budget := retryhttp.NewRetryBudget(retryhttp.RetryBudgetOptions{Capacity: 2, NoParking: true})
	tr := retryhttp.New(
		retryhttp.WithRetryBudget(budget),
		retryhttp.WithMaxRetries(3),
		retryhttp.WithDelayFn(func(retryhttp.Attempt) time.Duration { return 0 }),
	)
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}

	for i := 1; i <= 3; i++ {
		before := hits.Load()
		res, err := client.Get(srv.URL)
		if err != nil {
			fmt.Println(err)
			return
		}
		res.Body.Close()
		fmt.Printf("request %d: %d after %d attempts\n", i, res.StatusCode, hits.Load()-before)
	}
	// Output:
	// request 1: 503 after 3 attempts
	// request 2: 503 after 1 attempts
	// request 3: 503 after 1 attempts
}

// A budget on the test's fake clock, the Transport's too: the second retry
// to a failing backend finds no token and parks; the budget releases it as
// a probe once the host has been quiet for a quarter of a second of the
// fake clock, which jumps there at once, so the test does not wait.
func ExampleRetryBudgetOptions_clock() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()

	clock := retryhttptest.NewClock(time.Now()) // jumps to the end of every wait
	budget := retryhttp.NewRetryBudget(retryhttp.RetryBudgetOptions{Capacity: 1, Clock: clock})
	tr := retryhttp.New(
		retryhttp.WithClock(clock),
		retryhttp.WithRetryBudget(budget),
		retryhttp.WithMaxRetries(2),
		retryhttp.WithHooks(retryhttp.Hooks{OnPark: func(e retryhttp.ParkEvent) { fmt.Println("retry", e.Kind) }}),
	)
	res, err := (&http.Client{Transport: tr}).Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	res.Body.Close()
	fmt.Println(res.StatusCode)
	fmt.Println("waited on the fake clock:", clock.Slept() > 0)
	// Output:
	// retry parked
	// retry released
	// 503
	// waited on the fake clock: true
}
