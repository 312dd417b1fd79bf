// Command logging shows what a retryhttp.Transport tells about its work:
// hooks on every attempt and decision, and log/slog records of retries and
// give-ups, with no setup:
//
//	go run ./examples/logging
//
// It starts a flaky HTTP server on loopback and sends two requests: one
// that succeeds after two 503s, and one that gives up after its retries,
// whose URL carries a password and a token (neither is logged). The
// hooks print a line per attempt and decision; the logger writes its
// records as text. It exits with status 1 if an outcome is not the expected
// one.
package main

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/seed2409de8f/retryhttp"
)

func main() {
	// /flaky fails twice then answers 200; /down always answers 503.
	var mu sync.Mutex
	seen := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.URL.Path]++
		n := seen[r.URL.Path]
		mu.Unlock()
		if r.URL.Path == "/down" || n <= 2 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ok")
	}))
	defer srv.Close()

	tr := retryhttp.New(
		retryhttp.WithMaxRetries(2),
		retryhttp.WithDelayFn(func(a retryhttp.Attempt) time.Duration { return time.Duration(a.Count) * 10 * time.Millisecond }),
		retryhttp.WithHooks(retryhttp.Hooks{
			OnAttempt: func(ai retryhttp.AttemptInfo) {
				a := ai.Attempt
				fmt.Printf("  hook: attempt %d of %d: %s\n", a.Count, ai.MaxRetries+1, outcome(a))
			},
			OnRetryDecision: func(d retryhttp.Decision) {
				if d.Retry {
					fmt.Printf("  hook: retry (%s) in %v\n", d.Cause(), d.Delay)
					return
				}
				fmt.Printf("  hook: stop after %d attempts: %s (gave up: %v)\n", d.Attempt.Count, d.Reason, d.Reason.GaveUp())
			},
		}),
		retryhttp.WithLogger(slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
			ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
				if a.Key == slog.TimeKey {
					return slog.Attr{} // steadier output
				}
				return a
			},
		}))),
	)
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}

	secret := strings.Replace(srv.URL, "http://", "http://alice:hunter2@", 1)
	requests := []struct {
		url  string
		want int
	}{
		{srv.URL + "/flaky", http.StatusOK},
		{secret + "/down?token=s3cr3t", http.StatusServiceUnavailable},
	}
	ok := true
	for _, r := range requests {
		fmt.Printf("GET %s\n", r.url)
		res, err := client.Get(r.url)
		if err != nil {
			fmt.Println("  error:", err)
			ok = false
			continue
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		fmt.Printf("  -> %d\n", res.StatusCode)
		ok = ok && res.StatusCode == r.want
	}
	if !ok {
		os.Exit(1)
	}
}

func outcome(a retryhttp.Attempt) string {
	if a.Err != nil {
		return "error: " + a.Err.Error()
	}
	return fmt.Sprint(a.Res.StatusCode)
}
