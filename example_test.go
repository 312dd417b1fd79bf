package retryhttp_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"time"

	"github.com/seed2409de8f/retryhttp"
)

// exampleFlakyServer answers the first failures requests with status, and the
// others with 200 "hello". It counts the requests it sees.
func exampleFlakyServer(failures int32, status int) (*httptest.Server, *atomic.Int32) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) <= failures {
			http.Error(w, http.StatusText(status), status)
			return
		}
		fmt.Fprintln(w, "hello")
	}))
	return srv, &n
}

func ExampleNew() {
	srv, attempts := exampleFlakyServer(2, http.StatusServiceUnavailable)
	defer srv.Close()

	tr := retryhttp.New(
		// Short waits keep the example fast; by default the first retry
		// waits up to 250ms.
		retryhttp.WithDelayFn(retryhttp.CustomizedDelayFn(retryhttp.CustomizedDelayFnOptions{
			Base: time.Millisecond,
		})),
	)
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}

	res, err := client.Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)

	fmt.Println(res.Status, strings.TrimSpace(string(body)))
	fmt.Println("attempts:", attempts.Load())
	// Output:
	// 200 OK hello
	// attempts: 3
}

func ExampleWithShouldRetryFn() {
	srv, attempts := exampleFlakyServer(1, http.StatusInternalServerError)
	defer srv.Close()

	// Also retry a 500 when the request is a GET; otherwise decide as the
	// default does.
	shouldRetry := func(a retryhttp.Attempt) bool {
		if a.Res != nil && a.Res.StatusCode == http.StatusInternalServerError && a.Req.Method == http.MethodGet {
			return true
		}
		return retryhttp.DefaultShouldRetryFn(a)
	}
	tr := retryhttp.New(
		retryhttp.WithShouldRetryFn(shouldRetry),
		retryhttp.WithDelayFn(func(retryhttp.Attempt) time.Duration { return 0 }),
	)
	defer tr.CloseIdleConnections()

	res, err := (&http.Client{Transport: tr}).Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	res.Body.Close()

	fmt.Println(res.Status, "after", attempts.Load(), "attempts")
	// Output:
	// 200 OK after 2 attempts
}

func ExampleCustomizedShouldRetryFn() {
	srv, attempts := exampleFlakyServer(1, http.StatusGatewayTimeout)
	defer srv.Close()

	// Retry 504 as well as 502 and 503, for the usual idempotent methods.
	tr := retryhttp.New(
		retryhttp.WithShouldRetryFn(retryhttp.CustomizedShouldRetryFn(retryhttp.CustomizedShouldRetryFnOptions{
			RetryableStatusCodes: []int{
				http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout,
			},
		})),
		retryhttp.WithDelayFn(func(retryhttp.Attempt) time.Duration { return 0 }),
	)
	defer tr.CloseIdleConnections()

	res, err := (&http.Client{Transport: tr}).Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	res.Body.Close()

	fmt.Println(res.Status, "after", attempts.Load(), "attempts")
	// Output:
	// 200 OK after 2 attempts
}

func ExampleDefaultShouldRetryFn() {
	unavailable := &http.Response{StatusCode: http.StatusServiceUnavailable, Header: http.Header{}}

	get, _ := http.NewRequest(http.MethodGet, "http://example.com/", nil)
	post, _ := http.NewRequest(http.MethodPost, "http://example.com/", nil)
	keyed, _ := http.NewRequest(http.MethodPost, "http://example.com/", nil)
	keyed.Header.Set("Idempotency-Key", "8e03978e-40d5-43e8-bc93-6894a57f9324")

	tests := []struct {
		name string
		req  *http.Request
	}{
		{"GET", get},
		{"POST", post},
		{"POST with Idempotency-Key", keyed},
	}
	for _, tt := range tests {
		a := retryhttp.Attempt{Count: 1, Req: tt.req, Res: unavailable}
		fmt.Printf("503 after %s: retry %v\n", tt.name, retryhttp.DefaultShouldRetryFn(a))
	}
	// Output:
	// 503 after GET: retry true
	// 503 after POST: retry false
	// 503 after POST with Idempotency-Key: retry true
}

func ExampleSetMaxRetries() {
	srv, attempts := exampleFlakyServer(100, http.StatusServiceUnavailable)
	defer srv.Close()

	// The transport retries up to DefaultMaxRetries (3) times ...
	tr := retryhttp.New(retryhttp.WithDelayFn(func(retryhttp.Attempt) time.Duration { return 0 }))
	defer tr.CloseIdleConnections()

	// ... but this request only once.
	ctx := retryhttp.SetMaxRetries(context.Background(), 1)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	res, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	res.Body.Close()

	// Out of retries, the last response is returned as it is.
	fmt.Println(res.Status, "after", attempts.Load(), "attempts")
	// Output:
	// 503 Service Unavailable after 2 attempts
}

func ExampleCustomizedDelayFn() {
	delay := retryhttp.CustomizedDelayFn(retryhttp.CustomizedDelayFnOptions{
		Base: 100 * time.Millisecond,
		Cap:  time.Second,
	})
	// Without Retry-After, the wait before retry n is uniform in
	// [0, min(Cap, Base·2^(n−1))).
	ceiling := 100 * time.Millisecond
	for n := 1; n <= 6; n++ {
		d := delay(retryhttp.Attempt{Count: n, Err: context.DeadlineExceeded})
		fmt.Printf("retry %d: under %v: %v\n", n, ceiling, d >= 0 && d < ceiling)
		ceiling = min(2*ceiling, time.Second)
	}

	// With Retry-After, the wait is that, give or take a third.
	res := &http.Response{StatusCode: http.StatusTooManyRequests, Header: http.Header{"Retry-After": {"3"}}}
	d := delay(retryhttp.Attempt{Count: 1, Res: res})
	fmt.Println("Retry-After 3: between 2s and 4s:", d >= 2*time.Second && d <= 4*time.Second)
	// Output:
	// retry 1: under 100ms: true
	// retry 2: under 200ms: true
	// retry 3: under 400ms: true
	// retry 4: under 800ms: true
	// retry 5: under 1s: true
	// retry 6: under 1s: true
	// Retry-After 3: between 2s and 4s: true
}

func ExampleWithAttemptTimeout() {
	// The first request hangs; the next ones answer at once.
	var attempts atomic.Int32
	stop := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if attempts.Add(1) == 1 {
			select {
			case <-r.Context().Done():
			case <-stop:
			}
			return
		}
		fmt.Fprintln(w, "hello")
	}))
	defer srv.Close()
	defer close(stop)

	// An attempt without response headers after 200ms is abandoned, and
	// retried since a GET is idempotent.
	tr := retryhttp.New(
		retryhttp.WithAttemptTimeout(200*time.Millisecond),
		retryhttp.WithDelayFn(func(retryhttp.Attempt) time.Duration { return 0 }),
	)
	defer tr.CloseIdleConnections()

	res, err := (&http.Client{Transport: tr}).Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer res.Body.Close()
	// The timeout bounds each attempt, not reading the body returned.
	body, _ := io.ReadAll(res.Body)

	fmt.Println(res.Status, strings.TrimSpace(string(body)), "after", attempts.Load(), "attempts")
	// Output:
	// 200 OK hello after 2 attempts
}
