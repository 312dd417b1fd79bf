package retryhttp_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/seed2409de8f/retryhttp"
	"github.com/seed2409de8f/retryhttp/retryhttptest"
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

// Example is the package's quick start against a local server that answers
// 503 once, then "hello": the defaults retry the GET after a short jittered
// wait (under 250ms) and the caller sees only the success.
func Example() {
	srv, attempts := exampleFlakyServer(1, http.StatusServiceUnavailable)
	defer srv.Close()

	tr := retryhttp.New() // up to 3 retries, only when safe
	defer tr.CloseIdleConnections()
	client := &http.Client{
		Transport: tr,
		Timeout:   30 * time.Second, // bounds all attempts and waits together
	}

	res, err := client.Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Status, strings.TrimSpace(string(body)))
	fmt.Println("attempts:", attempts.Load())
	// Output:
	// 200 OK hello
	// attempts: 2
}

// headerTransport sets a header on every request it sends, then sends it
// through next.
type headerTransport struct {
	next        http.RoundTripper
	name, value string
}

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context()) // a RoundTripper must not modify its request
	r.Header.Set(h.name, h.value)
	return h.next.RoundTrip(r)
}

// WithTransport puts a RoundTripper below the retries, where it sees every
// attempt: here one that sets a header, wrapping DefaultBaseTransport so as
// to keep the process's shared connection pool (and go-cleanhttp's
// settings). Each attempt carries the header, and the second carries
// Retry-Attempt too.
func ExampleWithTransport() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Printf("server: token=%s attempt=%d\n", r.Header.Get("X-Token"), retryhttp.AttemptFromRequest(r))
		if retryhttp.AttemptFromRequest(r) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()

	tr := retryhttp.New(
		retryhttp.WithTransport(headerTransport{next: retryhttp.DefaultBaseTransport(), name: "X-Token", value: "s3cr3t"}),
		retryhttp.WithDelayFn(func(retryhttp.Attempt) time.Duration { return 0 }),
	)
	res, err := (&http.Client{Transport: tr}).Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	res.Body.Close()
	fmt.Println(res.Status)
	// Output:
	// server: token=s3cr3t attempt=1
	// server: token=s3cr3t attempt=2
	// 200 OK
}

// A fake clock makes the transport's waits return at once and records
// them: a test of the retry settings takes milliseconds, whatever the
// Retry-After.
func ExampleWithClock() {
	srv := retryhttptest.NewServer(nil,
		retryhttptest.TooManyRequests(30*time.Second),
		retryhttptest.Status(http.StatusOK),
	)
	defer srv.Close()
	clock := retryhttptest.NewClock(time.Now())
	exact := retryhttp.CustomizedDelayFn(retryhttp.CustomizedDelayFnOptions{JitterMagnitude: -1})
	tr := retryhttp.New(retryhttp.WithClock(clock), retryhttp.WithDelayFn(exact))
	defer tr.CloseIdleConnections()

	start := time.Now()
	res, err := (&http.Client{Transport: tr}).Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	res.Body.Close()
	fmt.Println(res.Status, clock.Sleeps(), time.Since(start) < 10*time.Second)
	// Output: 200 OK [30s] true
}

// Conditions are added to the default rules, not written around them: 504
// joins 502 and 503, and a RetryIf condition retries a 500 that says it is
// transient. A 2xx is still never retried, whatever RetryIf says.
func ExampleCustomizedShouldRetryFnOptions_retryIf() {
	shouldRetry := retryhttp.CustomizedShouldRetryFn(retryhttp.CustomizedShouldRetryFnOptions{
		AdditionalStatusCodes: []int{http.StatusGatewayTimeout},
		RetryIf: func(a retryhttp.Attempt) bool {
			return a.Res != nil && a.Res.Header.Get("X-Transient") == "true"
		},
	})
	get, _ := http.NewRequest(http.MethodGet, "http://example.test/", nil)
	for _, res := range []*http.Response{
		{StatusCode: 503, Header: http.Header{}},
		{StatusCode: 504, Header: http.Header{}},
		{StatusCode: 500, Header: http.Header{}},
		{StatusCode: 500, Header: http.Header{"X-Transient": {"true"}}},
		{StatusCode: 202, Header: http.Header{"X-Transient": {"true"}, "Retry-After": {"1"}}},
	} {
		a := retryhttp.Attempt{Count: 1, Req: get, Res: res}
		fmt.Println(res.StatusCode, res.Header.Get("X-Transient"), shouldRetry(a))
	}
	// Output:
	// 503  true
	// 504  true
	// 500  false
	// 500 true true
	// 202 true false
}

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

// Code moved from go-retryablehttp may expect an error when retries give
// up; WithErrorOnGiveUp gives it one, carrying the last status.
func ExampleWithErrorOnGiveUp() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()

	tr := retryhttp.New(noWait, retryhttp.WithErrorOnGiveUp(true))
	defer tr.CloseIdleConnections()

	res, err := (&http.Client{Transport: tr}).Get(srv.URL)
	fmt.Println(res == nil)
	fmt.Println(errors.Is(err, retryhttp.ErrRetriesExhausted))
	var g *retryhttp.GiveUpError
	if errors.As(err, &g) {
		fmt.Println(g)
		fmt.Println(g.StatusCode, g.Attempts)
	}
	// Output:
	// true
	// true
	// retryhttp: giving up after 4 attempts: last status 503 Service Unavailable
	// 503 4
}

// A client that tells the server how long it still waits: the request's
// context has 2s left, so the attempt says at most 2000 ms.
func ExampleWithDeadlineHeader() {
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		ms, _ := strconv.Atoi(r.Header.Get(retryhttp.DeadlineHeader))
		fmt.Println("the caller waits at most 2s:", ms > 1000 && ms <= 2000)
	}))
	defer srv.Close()

	tr := retryhttp.New(retryhttp.WithDeadlineHeader(true))
	defer tr.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	res, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	res.Body.Close()
	// Output:
	// the caller waits at most 2s: true
}

// A retry gets a fresh token: the hook rewrites the transport's copy of the
// request, and the caller's request keeps its header.
func ExampleWithPrepareRetry() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer fresh" {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "hello")
	}))
	defer srv.Close()

	tr := retryhttp.New(
		noWait,
		retryhttp.WithPrepareRetry(func(r *http.Request) error {
			r.Header.Set("Authorization", "Bearer fresh") // say, from a token source
			return nil
		}),
	)
	defer tr.CloseIdleConnections()

	req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
	req.Header.Set("Authorization", "Bearer stale")
	res, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	fmt.Println(res.Status, string(body))
	fmt.Println("caller's header:", req.Header.Get("Authorization"))
	// Output:
	// 200 OK hello
	// caller's header: Bearer stale
}

// noWait makes the examples' retries immediate.
var noWait = retryhttp.WithDelayFn(func(retryhttp.Attempt) time.Duration { return 0 })

// A retry skipped because the request's body, streamed without GetBody,
// was longer than the buffer limit: the error says so.
func ExampleErrBodyNotReplayable() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		conn, _, _ := http.NewResponseController(w).Hijack()
		conn.Close() // the connection is lost before an answer: worth a retry
	}))
	defer srv.Close()

	tr := retryhttp.New(noWait, retryhttp.WithBodyBufferLimit(4))
	defer tr.CloseIdleConnections()
	body := io.NopCloser(io.LimitReader(neverEnding('x'), 64)) // no GetBody
	req, _ := http.NewRequest(http.MethodPut, srv.URL, body)

	_, err := tr.RoundTrip(req)
	fmt.Println(errors.Is(err, retryhttp.ErrBodyNotReplayable))
	// Output:
	// true
}

// neverEnding reads as an endless run of one byte.
type neverEnding byte

func (b neverEnding) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(b)
	}
	return len(p), nil
}

// A server that pins a session with a cookie on its 503: the retry carries
// the cookie, because the transport shares the client's jar.
func ExampleWithCookieJar() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := r.Cookie("session"); err != nil {
			http.SetCookie(w, &http.Cookie{Name: "session", Value: "s1"})
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "hello")
	}))
	defer srv.Close()

	jar, _ := cookiejar.New(nil)
	tr := retryhttp.New(noWait, retryhttp.WithCookieJar(jar))
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Jar: jar}

	res, err := client.Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	fmt.Println(res.Status, string(body))
	// Output:
	// 200 OK hello
}

// A POST retried after a 503, with the key the transport injected: the same
// on both attempts, under the header the server expects. Honored tells the
// transport that the server answers a replayed key without charging twice;
// without it, the POST would not be retried after a 503.
func ExampleWithIdempotencyKeys() {
	var attempts atomic.Int32
	keys := make(chan string, 8) // the key of each attempt, as the server saw it
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		keys <- r.Header.Get("X-Idempotency-Key")
		if attempts.Add(1) == 1 {
			http.Error(w, "try again", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "charged")
	}))
	defer srv.Close()

	tr := retryhttp.New(
		retryhttp.WithIdempotencyKeys(retryhttp.IdempotencyKeys{Header: "X-Idempotency-Key", Honored: true}),
		retryhttp.WithDelayFn(func(retryhttp.Attempt) time.Duration { return time.Millisecond }),
	)
	defer tr.CloseIdleConnections()

	res, err := (&http.Client{Transport: tr}).Post(srv.URL, "text/plain", nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	res.Body.Close()
	first, second := <-keys, <-keys
	fmt.Printf("status %d after %d attempts; same key: %v; a UUID: %v\n",
		res.StatusCode, attempts.Load(), first == second, len(first) == 36)
	// Output:
	// status 200 after 2 attempts; same key: true; a UUID: true
}

// Logging retries with log/slog: one record per retry and one when the
// transport gives up. The handler here drops the time and the URL (whose
// port changes from run to run) to keep the output stable.
func ExampleWithLogger() {
	srv, _ := exampleFlakyServer(10, http.StatusServiceUnavailable)
	defer srv.Close()

	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey || a.Key == "url" {
				return slog.Attr{}
			}
			return a
		},
	}))
	tr := retryhttp.New(
		retryhttp.WithLogger(logger),
		retryhttp.WithMaxRetries(1),
		retryhttp.WithDelayFn(func(retryhttp.Attempt) time.Duration { return 2 * time.Millisecond }),
	)
	defer tr.CloseIdleConnections()

	res, err := (&http.Client{Transport: tr}).Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	res.Body.Close()
	// Output:
	// level=INFO msg="retryhttp: retrying" method=GET attempt=1 max_attempts=2 delay=2ms status=503 reason=status
	// level=WARN msg="retryhttp: giving up" method=GET attempt=2 max_attempts=2 status=503 reason="retries exhausted"
}

// A hook called after every attempt, with its outcome.
func ExampleWithHooks() {
	srv, _ := exampleFlakyServer(1, http.StatusBadGateway)
	defer srv.Close()

	tr := retryhttp.New(
		retryhttp.WithHooks(retryhttp.Hooks{
			OnAttempt: func(ai retryhttp.AttemptInfo) {
				a := ai.Attempt
				if a.Err != nil {
					fmt.Printf("attempt %d of %d: %v\n", a.Count, ai.MaxRetries+1, a.Err)
					return
				}
				fmt.Printf("attempt %d of %d: %d\n", a.Count, ai.MaxRetries+1, a.Res.StatusCode)
			},
		}),
		retryhttp.WithDelayFn(func(retryhttp.Attempt) time.Duration { return 0 }),
	)
	defer tr.CloseIdleConnections()

	res, err := (&http.Client{Transport: tr}).Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	res.Body.Close()
	// Output:
	// attempt 1 of 4: 502
	// attempt 2 of 4: 200
}

// A hook called at every decision: each retry, with its cause and delay,
// and the stop, with its reason.
func ExampleWithHooks_retryDecision() {
	srv, _ := exampleFlakyServer(2, http.StatusServiceUnavailable)
	defer srv.Close()

	tr := retryhttp.New(
		retryhttp.WithHooks(retryhttp.Hooks{
			OnRetryDecision: func(d retryhttp.Decision) {
				if d.Retry {
					fmt.Printf("retry after attempt %d (%s), in %v\n", d.Attempt.Count, d.Cause(), d.Delay)
					return
				}
				fmt.Printf("stop after %d attempts: %s\n", d.Attempt.Count, d.Reason)
			},
		}),
		retryhttp.WithDelayFn(func(retryhttp.Attempt) time.Duration { return 0 }),
	)
	defer tr.CloseIdleConnections()

	res, err := (&http.Client{Transport: tr}).Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	res.Body.Close()
	// Output:
	// retry after attempt 1 (status), in 0s
	// retry after attempt 2 (status), in 0s
	// stop after 3 attempts: success
}

// Hedging a slow backend: the first attempt hangs, so after 10ms the
// transport sends a second one alongside it; the second answers, wins, and
// the first is cancelled.
func ExampleWithHedging() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The first attempt (hedges carry AttemptHeader) hangs until the
		// transport cancels it, whichever arrives first.
		if r.Header.Get(retryhttp.AttemptHeader) == "" {
			<-r.Context().Done()
			return
		}
		fmt.Fprint(w, "fast")
	}))
	defer srv.Close()

	tr := retryhttp.New(retryhttp.WithHedging(10*time.Millisecond, 1))
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}

	res, err := client.Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	fmt.Println(res.StatusCode, string(body), "attempt", retryhttp.AttemptFromRequest(res.Request))
	// Output:
	// 200 fast attempt 2
}

// Hedging that follows the destination's latency: no delay is set by hand.
// The first 80 requests fill the host's window (the 95th percentile needs
// that many first attempts) and are not hedged; then a request whose first
// attempt hangs gets a hedge after about the host's 95th percentile
// latency, a millisecond or two here, and the hedge wins.
func ExampleWithAdaptiveHedging() {
	var hang atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Once hang is set, a first attempt (hedges carry AttemptHeader)
		// hangs until the transport cancels it.
		if hang.Load() && r.Header.Get(retryhttp.AttemptHeader) == "" {
			<-r.Context().Done()
			return
		}
		fmt.Fprint(w, "fast")
	}))
	defer srv.Close()

	tr := retryhttp.New(retryhttp.WithAdaptiveHedging(0.95, 1))
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	get := func() (string, int) {
		res, err := client.Get(srv.URL)
		if err != nil {
			return err.Error(), 0
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		return string(body), retryhttp.AttemptFromRequest(res.Request)
	}

	for range 80 {
		get()
	}
	hang.Store(true)
	fmt.Println(get())
	// Output:
	// fast 2
}
