package retryhttp_test

import (
	"errors"
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

// A dead backend drains its host's bucket: RetryBudget.Hosts shows the
// tokens left, what a gauge of the budget reports (otelretryhttp's
// ObserveRetryBudget). The budget is the one passed to WithRetryBudget;
// DefaultRetryBudget gives that of Transports made without the option.
func ExampleRetryBudget_Hosts() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	budget := retryhttp.NewRetryBudget(retryhttp.RetryBudgetOptions{Capacity: 2, NoParking: true})
	tr := retryhttp.New(retryhttp.WithRetryBudget(budget), retryhttp.WithDelayFn(func(retryhttp.Attempt) time.Duration { return 0 }))
	defer tr.CloseIdleConnections()

	res, err := (&http.Client{Transport: tr}).Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	res.Body.Close()
	for h := range budget.Hosts() {
		fmt.Printf("%d; tokens left %.0f of %d; parked %d\n", res.StatusCode, h.Tokens, h.Capacity, h.Parked)
	}
	// Output:
	// 503; tokens left 0 of 2; parked 0
}

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

// A 429 that says when its quota resets, in the IETF RateLimit field, is
// retried after that wait (here 10s, moved by up to ±1/3); Retry-After,
// when present, would win.
func ExampleDefaultDelayFn_rateLimitReset() {
	res := &http.Response{
		StatusCode: http.StatusTooManyRequests,
		Header: http.Header{
			"Ratelimit":        {`"default";r=0;t=10`},
			"Ratelimit-Policy": {`"default";q=100;w=60`},
		},
	}
	d := retryhttp.DefaultDelayFn(retryhttp.Attempt{Count: 1, Res: res})
	fmt.Println(d >= 6666*time.Millisecond && d <= 13334*time.Millisecond)
	// Output: true
}

// With WithHoldDuringPause, once a server answers 429 with Retry-After, the
// other requests to its host wait for the pause to run out too, instead of
// meeting the limit themselves: for APIs that ask clients to stop while
// they are limited. Here the first request is limited for a second; the
// second request, sent meanwhile, reaches the server after the pause.
func ExampleWithHoldDuringPause() {
	var limitedAt, secondAt atomic.Int64 // Unix nanoseconds, set by the server
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/first" && limitedAt.CompareAndSwap(0, time.Now().UnixNano()):
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
		case r.URL.Path == "/second":
			secondAt.Store(time.Now().UnixNano())
		}
	}))
	defer srv.Close()
	decided := make(chan struct{}, 1) // the 429 reached the client, which will retry
	client := &http.Client{Transport: retryhttp.New(
		retryhttp.WithHoldDuringPause(true),
		retryhttp.WithHooks(retryhttp.Hooks{OnRetryDecision: func(d retryhttp.Decision) {
			if d.Retry {
				decided <- struct{}{}
			}
		}}),
	)}

	done := make(chan int)
	go func() {
		res, err := client.Get(srv.URL + "/first")
		if err != nil {
			done <- 0
			return
		}
		res.Body.Close()
		done <- res.StatusCode
	}()
	<-decided
	res, err := client.Get(srv.URL + "/second")
	if err != nil {
		fmt.Println(err)
		return
	}
	res.Body.Close()
	fmt.Println("first:", <-done)
	waited := time.Duration(secondAt.Load() - limitedAt.Load())
	fmt.Println("second:", res.StatusCode, "after the pause:", waited >= time.Second)
	// Output:
	// first: 200
	// second: 200 after the pause: true
}

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
		}),
		retryhttp.WithHooks(retryhttp.Hooks{
			OnCircuitStateChange: func(_ string, from, to retryhttp.CircuitState) {
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
