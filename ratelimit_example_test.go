package retryhttp_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"time"

	"github.com/seed2409de8f/retryhttp"
)

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
