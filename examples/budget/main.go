// Command budget shows how the retry budget keeps a dead backend from being
// hit four times per request.
//
// It starts, on loopback, a backend that answers every request with 503,
// and sends it 200 GETs from 8 goroutines three times:
//  1. through a Transport with its defaults (the process's shared retry
//     budget): the retries decided before ten failures in a row show the
//     outage are sent, with a token (ten at most); the others are parked,
//     token or not, waiting for the backend to answer again, and a few of
//     them are released one at a time as probes; after 2s without a
//     success the host's retries are refused at once. The backend sees
//     about 1.05-1.1 requests per request (the first requests wait up to
//     2s before failing);
//  2. through a Transport with the budget off (WithRetryBudget(nil)): every
//     request is tried four times;
//  3. through the first Transport again: the backend has had no success
//     for 2s, so a failing request is neither retried nor parked; after the
//     backend heals, 100 successes refill the bucket by ten tokens, and a
//     request that fails once is retried again (with a token; without one,
//     it would be too: the host answers, and nothing shows that load hurts
//     it).
//
// Run it with: go run ./examples/budget
package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seed2409de8f/retryhttp"
)

func main() {
	var hits atomic.Int64
	var healthy, flakyOnce atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if r.URL.Path == "/flaky" && flakyOnce.CompareAndSwap(false, true) {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		if !healthy.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ok")
	}))
	defer srv.Close()

	// Waits of 1ms instead of the default backoff, to finish quickly.
	fast := retryhttp.WithDelayFn(func(retryhttp.Attempt) time.Duration { return time.Millisecond })
	withBudget := retryhttp.New(fast)
	defer withBudget.CloseIdleConnections()
	noBudget := retryhttp.New(fast, retryhttp.WithRetryBudget(nil))
	defer noBudget.CloseIdleConnections()

	const requests = 200
	for _, c := range []struct {
		name string
		tr   *retryhttp.Transport
	}{
		{"defaults (budget on)", withBudget},
		{"WithRetryBudget(nil)", noBudget},
	} {
		hits.Store(0)
		send(&http.Client{Transport: c.tr}, srv.URL, requests)
		fmt.Printf("dead backend, %d GETs, %-22s %4d requests seen = %.3f per GET\n",
			requests, c.name+":", hits.Load(), float64(hits.Load())/requests)
	}

	client := &http.Client{Transport: withBudget}
	fmt.Println()
	hits.Store(0)
	get(client, srv.URL+"/flaky")
	fmt.Printf("budget spent, a request failing once:   %d request seen (no retry)\n", hits.Load())

	healthy.Store(true)
	flakyOnce.Store(false)
	send(client, srv.URL, 100)
	fmt.Println("the backend heals: 100 successful GETs refill the budget by 10 tokens")
	hits.Store(0)
	status := get(client, srv.URL+"/flaky")
	fmt.Printf("a request failing once:                 %d requests seen, status %d (retried)\n", hits.Load(), status)
}

// send sends n GETs to url from 8 goroutines.
func send(c *http.Client, url string, n int) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) {
				get(c, url)
			}
		}()
	}
	wg.Wait()
}

func get(c *http.Client, url string) int {
	res, err := c.Get(url)
	if err != nil {
		fmt.Println("error:", err)
		return 0
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res.StatusCode
}
