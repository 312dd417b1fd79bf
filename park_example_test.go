package retryhttp_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"time"

	"github.com/seed2409de8f/retryhttp"
)

// A backend down for its first two requests: the first retry spends the
// budget's only token and fails; the second finds no token and is parked,
// instead of being dropped, until the host answers again. The parked retry
// is released, and the request succeeds.
func ExampleRetryBudgetOptions_parking() {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if n.Add(1) <= 2 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		fmt.Fprint(w, "ok")
	}))
	defer srv.Close()

	budget := retryhttp.NewRetryBudget(retryhttp.RetryBudgetOptions{
		Capacity: 1,               // one retry at once, the others park
		MaxWait:  5 * time.Second, // parked for at most 5s per request
	})
	tr := retryhttp.New(
		retryhttp.WithRetryBudget(budget),
		retryhttp.WithDelayFn(func(retryhttp.Attempt) time.Duration { return 10 * time.Millisecond }),
		retryhttp.WithHooks(retryhttp.Hooks{OnPark: func(e retryhttp.ParkEvent) {
			fmt.Printf("retry after attempt %d: %s\n", e.Attempt.Count, e.Kind)
		}}),
	)
	defer tr.CloseIdleConnections()
	res, err := (&http.Client{Transport: tr}).Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	res.Body.Close()
	fmt.Println(res.StatusCode, "after", n.Load(), "attempts")
	// Output:
	// retry after attempt 2: parked
	// retry after attempt 2: released
	// 200 after 3 attempts
}
