package retryhttp_test

import (
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/seed2409de8f/retryhttp"
)

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
