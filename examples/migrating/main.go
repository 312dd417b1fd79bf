// Command migrating shows code moved from hashicorp/go-retryablehttp to
// retryhttp, setting by setting, against loopback servers (docs/migrating.md
// has the full mapping):
//
//	go run ./examples/migrating
//
// It prints what each server saw and what the caller got, and exits with
// status 1 if an outcome is not the expected one. It takes well under a
// second: the waits are shortened to a millisecond.
package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/seed2409de8f/retryhttp"
)

// failing starts a server that answers the first failures requests with
// status, and the others with 200. It counts the requests it sees.
func failing(failures int32, status int) (*httptest.Server, *atomic.Int32) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if n.Add(1) <= failures {
			w.WriteHeader(status)
		}
	}))
	return srv, &n
}

var failed bool

func check(ok bool, format string, args ...any) {
	mark := "ok  "
	if !ok {
		mark, failed = "FAIL", true
	}
	fmt.Printf("  %s %s\n", mark, fmt.Sprintf(format, args...))
}

func main() {
	// The client as go-retryablehttp configured it:
	//
	//	rc := retryablehttp.NewClient()
	//	rc.RetryMax = 4                              // WithMaxRetries(4)
	//	rc.RetryWaitMin, rc.RetryWaitMax = 1*time.Second, 30*time.Second
	//	                                             // CustomizedDelayFn{Base, Cap}
	//	rc.Logger = slog.Default()                   // WithLogger(slog.Default())
	//	rc.PrepareRetry = sign                       // WithPrepareRetry(sign)
	//	rc.ResponseLogHook = logResponse             // WithHooks(Hooks{OnAttempt: ...})
	//	client := rc.StandardClient()
	//
	// and as retryhttp configures it (waits shortened here):
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey || a.Key == "url" {
				return slog.Attr{} // stable output: no time, no port
			}
			return a
		},
	}))
	var signed atomic.Int32
	options := []retryhttp.Option{
		retryhttp.WithMaxRetries(4),
		retryhttp.WithDelayFn(retryhttp.CustomizedDelayFn(retryhttp.CustomizedDelayFnOptions{
			Base: time.Millisecond, Cap: 4 * time.Millisecond,
		})),
		retryhttp.WithLogger(logger),
		retryhttp.WithPrepareRetry(func(r *http.Request) error {
			signed.Add(1)
			r.Header.Set("X-Signature", fmt.Sprintf("sig-%d", retryhttp.AttemptFromRequest(r)))
			return nil
		}),
		retryhttp.WithHooks(retryhttp.Hooks{OnAttempt: func(ai retryhttp.AttemptInfo) {
			if res := ai.Attempt.Res; res != nil {
				fmt.Printf("  response hook: attempt %d got %d\n", ai.Attempt.Count, res.StatusCode)
			}
		}}),
	}
	tr := retryhttp.New(options...)
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}

	fmt.Println("1. GET answered 503, 503, then 200: retried, as go-retryablehttp does")
	srv, hits := failing(2, http.StatusServiceUnavailable)
	res, err := client.Get(srv.URL)
	if err == nil {
		res.Body.Close()
	}
	check(err == nil && res.StatusCode == 200, "200 after %d requests, %d retries signed by PrepareRetry", hits.Load(), signed.Load())
	srv.Close()

	fmt.Println("2. POST answered 500: sent once (go-retryablehttp sends it 5 times)")
	srv, hits = failing(100, http.StatusInternalServerError)
	res, err = client.Post(srv.URL, "text/plain", strings.NewReader("pay 10 EUR"))
	if err == nil {
		res.Body.Close()
	}
	check(err == nil && res.StatusCode == 500 && hits.Load() == 1, "the caller got %d after %d request", statusOf(res), hits.Load())
	srv.Close()

	fmt.Println("3. GET answered 503 every time: giving up returns the last response, not an error")
	srv, hits = failing(100, http.StatusServiceUnavailable)
	res, err = client.Get(srv.URL)
	if err == nil {
		res.Body.Close()
	}
	check(err == nil && res.StatusCode == 503 && hits.Load() == 5, "the caller got %d, no error, after %d requests", statusOf(res), hits.Load())
	srv.Close()

	fmt.Println("4. The same with WithErrorOnGiveUp(true): an error, as go-retryablehttp's \"giving up after 5 attempt(s)\"")
	srv, hits = failing(100, http.StatusServiceUnavailable)
	strict := retryhttp.New(append(options, retryhttp.WithErrorOnGiveUp(true))...)
	res, err = (&http.Client{Transport: strict, Timeout: 10 * time.Second}).Get(srv.URL)
	if err == nil {
		res.Body.Close()
	}
	var giveUp *retryhttp.GiveUpError
	check(errors.As(err, &giveUp) && errors.Is(err, retryhttp.ErrRetriesExhausted) && giveUp.Attempts == 5 && hits.Load() == 5,
		"error %v", err)
	srv.Close()
	strict.CloseIdleConnections()

	fmt.Println("5. GET answered 500: go-retryablehttp retries any 5xx but 501; retryhttp retries 502 and 503, unless told to")
	srv, hits = failing(1, http.StatusInternalServerError)
	res, err = client.Get(srv.URL)
	if err == nil {
		res.Body.Close()
	}
	check(err == nil && res.StatusCode == 500 && hits.Load() == 1, "default policy: %d after %d request", statusOf(res), hits.Load())
	hits.Store(0)
	like := retryhttp.New(append(options, retryhttp.WithShouldRetryFn(retryhttp.CustomizedShouldRetryFn(
		retryhttp.CustomizedShouldRetryFnOptions{AdditionalStatusCodes: []int{500, 504}})))...)
	res, err = (&http.Client{Transport: like, Timeout: 10 * time.Second}).Get(srv.URL)
	if err == nil {
		res.Body.Close()
	}
	check(err == nil && res.StatusCode == 200 && hits.Load() == 2, "with AdditionalStatusCodes 500, 504: %d after %d requests", statusOf(res), hits.Load())
	srv.Close()
	like.CloseIdleConnections()

	if failed {
		fmt.Println("an outcome was not the expected one")
		os.Exit(1)
	}
}

func statusOf(res *http.Response) int {
	if res == nil {
		return 0
	}
	return res.StatusCode
}
