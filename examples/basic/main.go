// Command basic shows retryhttp at work against a flaky server, with no setup:
//
//	go run ./examples/basic
//
// It starts an HTTP server on loopback that fails the first attempts of each
// request, sends requests through an http.Client whose Transport is a
// retryhttp.Transport, and prints what the server saw, each retry the client
// decided on with the delay it chose, and the outcome. It takes a few seconds
// and exits with status 1 if an outcome is not the expected one.
package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/seed2409de8f/retryhttp"
)

// script is what the server answers to the attempts of one request, in
// order; once the script runs out, it answers 200.
type script []response

type response struct {
	status     int
	retryAfter string // the Retry-After header, if not empty
}

// flakyServer answers each path by its script and prints every attempt.
type flakyServer struct {
	scripts map[string]script

	mu       sync.Mutex
	attempts map[string]int
}

func (s *flakyServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	s.mu.Lock()
	s.attempts[r.URL.Path]++
	n := s.attempts[r.URL.Path]
	s.mu.Unlock()

	res := response{status: http.StatusOK}
	if sc := s.scripts[r.URL.Path]; n <= len(sc) {
		res = sc[n-1]
	}
	note := ""
	if res.retryAfter != "" {
		w.Header().Set("Retry-After", res.retryAfter)
		note = " (Retry-After: " + res.retryAfter + ")"
	}
	fmt.Printf("    server: %s %s, attempt %d%s -> %d %s\n",
		r.Method, r.URL.Path, n, keyNote(r), res.status, http.StatusText(res.status)+note)
	w.WriteHeader(res.status)
	fmt.Fprintf(w, "%d %s from attempt %d\n", res.status, http.StatusText(res.status), n)
}

// keyNote shows the idempotency key a request carries, if any.
func keyNote(r *http.Request) string {
	if key := r.Header.Get("Idempotency-Key"); key != "" {
		return " (Idempotency-Key: " + key + ")"
	}
	return ""
}

func (s *flakyServer) count(path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.attempts[path]
}

// loggingShouldRetry wraps retryhttp.DefaultShouldRetryFn to print the
// failed attempts it declines to retry.
func loggingShouldRetry(a retryhttp.Attempt) bool {
	retry := retryhttp.DefaultShouldRetryFn(a)
	if !retry && (a.Err != nil || a.Res.StatusCode >= 400) {
		fmt.Printf("    client: attempt %d got %s; DefaultShouldRetryFn says: do not retry\n", a.Count, outcome(a))
	}
	return retry
}

// loggingDelay wraps retryhttp.DefaultDelayFn to print the delay it chooses.
// The transport calls it only when it is about to retry (it may still give up
// if the delay is longer than its maximum or ends past the deadline).
func loggingDelay(a retryhttp.Attempt) time.Duration {
	d := retryhttp.DefaultDelayFn(a)
	why := fmt.Sprintf("full-jitter backoff, drawn from [0, %v)", backoffCeiling(a.Count))
	if ra := retryAfter(a); ra > 0 {
		// The transport never retries before the pause the server
		// stated: a shorter draw is waited up to it.
		why = fmt.Sprintf("Retry-After: %v ±1/3, never less than %v", ra, ra)
		d = max(d, ra)
	}
	fmt.Printf("    client: attempt %d got %s; retry %d in %v (%s)\n",
		a.Count, outcome(a), a.Count, d.Round(time.Millisecond), why)
	return d
}

// outcome describes the result of an attempt.
func outcome(a retryhttp.Attempt) string {
	if a.Err != nil {
		return "error: " + a.Err.Error()
	}
	return a.Res.Status
}

// backoffCeiling is the default backoff ceiling before retry n:
// min(10s, 250ms·2^(n−1)).
func backoffCeiling(n int) time.Duration {
	c := 250 * time.Millisecond
	for i := 1; i < n && c < 10*time.Second; i++ {
		c *= 2
	}
	return min(c, 10*time.Second)
}

// step is one request of the demo and what it must end with.
type step struct {
	title        string
	method, path string
	header       http.Header
	ctx          func(context.Context) context.Context // per-request overrides
	script       script
	wantStatus   int
	wantAttempts int
}

func main() {
	steps := []step{
		{
			title:  "A GET that fails twice with 503: retried after a short backoff.",
			method: http.MethodGet, path: "/flaky",
			script:     script{{status: 503}, {status: 503}},
			wantStatus: 200, wantAttempts: 3,
		},
		{
			title:  "A GET rate limited with 429 and Retry-After: 1: the client waits about a second.",
			method: http.MethodGet, path: "/busy",
			script:     script{{status: 429, retryAfter: "1"}},
			wantStatus: 200, wantAttempts: 2,
		},
		{
			title: "A POST that gets 503: not retried, POST is not idempotent (RFC 9110 §9.2.2).\n" +
				"   The transport adds an Idempotency-Key of its own, but cannot know this server honours it\n" +
				"   (go run ./examples/idempotency shows one that does).",
			method: http.MethodPost, path: "/orders",
			script:     script{{status: 503}},
			wantStatus: 503, wantAttempts: 1,
		},
		{
			title:  "A POST whose caller set an Idempotency-Key: the caller vouches for it, so it is retried.",
			method: http.MethodPost, path: "/orders-with-key",
			header:     http.Header{"Idempotency-Key": {"order-2024-0001"}},
			script:     script{{status: 503}},
			wantStatus: 200, wantAttempts: 2,
		},
		{
			title:  "A GET with retryhttp.SetMaxRetries(ctx, 0): this request alone is not retried.",
			method: http.MethodGet, path: "/no-retries",
			ctx:        func(ctx context.Context) context.Context { return retryhttp.SetMaxRetries(ctx, 0) },
			script:     script{{status: 503}},
			wantStatus: 503, wantAttempts: 1,
		},
		{
			title:  "A GET to a server that stays down: after 3 retries the last 503 is returned as is.",
			method: http.MethodGet, path: "/down",
			script:     script{{status: 503}, {status: 503}, {status: 503}, {status: 503}},
			wantStatus: 503, wantAttempts: 4,
		},
	}

	srv := &flakyServer{scripts: map[string]script{}, attempts: map[string]int{}}
	for _, s := range steps {
		srv.scripts[s.path] = s.script
	}
	ts := httptest.NewServer(srv)
	defer ts.Close()

	transport := retryhttp.New(
		retryhttp.WithShouldRetryFn(loggingShouldRetry),
		retryhttp.WithDelayFn(loggingDelay),
	)
	defer transport.CloseIdleConnections()
	client := &http.Client{Transport: transport, Timeout: 30 * time.Second}

	fmt.Printf("Flaky server listening on %s\n", ts.URL)
	fmt.Println("Client: &http.Client{Transport: retryhttp.New(...)}, with the default policy and")
	fmt.Println("delays wrapped to print their decisions; up to 3 retries (DefaultMaxRetries).")

	start := time.Now()
	failed := false
	for i, s := range steps {
		fmt.Printf("\n%d. %s\n", i+1, s.title)
		if err := run(client, ts.URL, s, srv); err != nil {
			fmt.Printf("    UNEXPECTED: %v\n", err)
			failed = true
		}
	}
	fmt.Printf("\nDone in %v.\n", time.Since(start).Round(time.Millisecond))
	if failed {
		os.Exit(1)
	}
}

// run sends one step's request, prints the outcome and checks it.
func run(client *http.Client, baseURL string, s step, srv *flakyServer) error {
	ctx := context.Background()
	if s.ctx != nil {
		ctx = s.ctx(ctx)
	}
	var body io.Reader
	if s.method == http.MethodPost {
		body = strings.NewReader(`{"item":"book","quantity":1}`) // replayed through GetBody
	}
	req, err := http.NewRequestWithContext(ctx, s.method, baseURL+s.path, body)
	if err != nil {
		return err
	}
	for k, v := range s.header {
		req.Header[k] = v
	}

	start := time.Now()
	res, err := client.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return err
	}
	attempts := srv.count(s.path)
	fmt.Printf("  result: %s after %d attempt(s) in %v; body: %s",
		res.Status, attempts, time.Since(start).Round(time.Millisecond), b)

	if res.StatusCode != s.wantStatus || attempts != s.wantAttempts {
		return fmt.Errorf("want status %d after %d attempt(s), got %d after %d",
			s.wantStatus, s.wantAttempts, res.StatusCode, attempts)
	}
	return nil
}

// retryAfter returns the pause a's response states in whole seconds, or 0.
func retryAfter(a retryhttp.Attempt) time.Duration {
	if a.Res == nil {
		return 0
	}
	n, err := strconv.Atoi(a.Res.Header.Get("Retry-After"))
	if err != nil || n <= 0 {
		return 0
	}
	return time.Duration(n) * time.Second
}
