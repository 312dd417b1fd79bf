// Command shedding shows inbound.LoadShedder keeping an overloaded server
// useful, and the headers it answers with.
//
// Part 1 starts, on loopback, a server with 8 workers (25ms of work each: 320
// requests/s) that queues what it cannot serve and does the work even for
// callers that gave up, and offers it 1.6 times that for 1.5s from clients
// with retryhttp's defaults and a 400ms timeout: first bare, then behind an
// adaptive LoadShedder. Bare, its queue grows until every answer comes too
// late; with the shedder, the excess gets 503 at once and the rest is served
// in time.
//
// Part 2 builds client → B → C, where C's shedder is full: B's Transport
// retries C (a shed request was never processed), gives up, and B, wrapped
// in inbound.Pushback, answers 503 with Retry-Pushback: no-retry, so the
// client does not retry B.
//
// Run it with: go run ./examples/shedding
package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seed2409de8f/retryhttp"
	"github.com/seed2409de8f/retryhttp/inbound"
)

const (
	workers  = 8
	work     = 25 * time.Millisecond
	clients  = 64
	period   = 125 * time.Millisecond // per client: 512 requests/s in all
	duration = 1500 * time.Millisecond
	timeout  = 400 * time.Millisecond
)

func main() {
	fmt.Printf("Part 1: %d workers × %v = %d requests/s; offered %d requests/s for %v; clients time out after %v\n\n",
		workers, work, int(workers/work.Seconds()), int(clients/period.Seconds()), duration, timeout)
	fmt.Printf("%-26s %9s %9s %10s %8s %8s\n", "server", "requests", "success", "goodput/s", "p50", "p99")
	overload("bare", nil)
	overload("adaptive LoadShedder", inbound.NewLoadShedder(inbound.LoadShedderOptions{Adaptive: true}))
	fmt.Println()
	chain()
}

// overload offers the workers 1.6 times their capacity, through shedder if
// it is not nil, and prints what the clients saw.
func overload(name string, shedder *inbound.LoadShedder) {
	slots := make(chan struct{}, workers)
	quit := make(chan struct{})
	var h http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case slots <- struct{}{}: // wait for a worker, as long as it takes
		case <-quit:
			return
		}
		time.Sleep(work) // done even if the caller has gone
		<-slots
		_, _ = io.WriteString(w, "ok")
	})
	if shedder != nil {
		h = shedder.Handler(h)
	}
	srv := httptest.NewServer(h)
	tr := retryhttp.New()
	client := &http.Client{Transport: tr, Timeout: timeout}

	var mu sync.Mutex
	var latencies []time.Duration
	var ok atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(period * time.Duration(i) / clients) // spread the clients' phases
			var inner sync.WaitGroup
			for at := time.Now(); at.Sub(start) < duration; at = at.Add(period) {
				time.Sleep(time.Until(at))
				inner.Add(1)
				go func() { // an open loop: users keep arriving
					defer inner.Done()
					t0 := time.Now()
					res, err := client.Get(srv.URL)
					if err == nil {
						_, _ = io.Copy(io.Discard, res.Body)
						res.Body.Close()
						if res.StatusCode == http.StatusOK {
							ok.Add(1)
						}
					}
					mu.Lock()
					latencies = append(latencies, time.Since(t0))
					mu.Unlock()
				}()
			}
			inner.Wait()
		}()
	}
	wg.Wait()
	close(quit)
	srv.Close()
	tr.CloseIdleConnections()

	slices.Sort(latencies)
	n := len(latencies)
	fmt.Printf("%-26s %9d %8.0f%% %10.0f %8v %8v\n", name, n, 100*float64(ok.Load())/float64(n),
		float64(ok.Load())/duration.Seconds(), latencies[n/2].Round(time.Millisecond),
		latencies[n*99/100].Round(time.Millisecond))
}

// chain sends one GET through client → B → C with C full, and prints what
// each hop saw.
func chain() {
	fmt.Println("Part 2: client → B (Pushback) → C (LoadShedder, full)")
	shedder := inbound.NewLoadShedder(inbound.LoadShedderOptions{Limit: 1})
	started, release := make(chan struct{}), make(chan struct{})
	var atC atomic.Int64
	c := httptest.NewServer(shedder.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hold" {
			close(started)
			<-release
		}
	})))
	defer c.Close()
	held := make(chan struct{})
	go func() {
		if res, err := http.Get(c.URL + "/hold"); err == nil {
			res.Body.Close()
		}
		close(held)
	}()
	<-started // C's one slot is taken: C sheds everything else

	// Waits of 1ms instead of the Retry-After, to finish at once.
	fast := retryhttp.WithDelayFn(func(retryhttp.Attempt) time.Duration { return time.Millisecond })
	toC := retryhttp.New(fast, retryhttp.WithHooks(retryhttp.Hooks{OnAttempt: func(ai retryhttp.AttemptInfo) {
		if res := ai.Attempt.Res; res != nil {
			atC.Add(1)
			fmt.Printf("  C → B, attempt %d: %s, Retry-After: %s, Retry-Pushback: %q\n", ai.Attempt.Count,
				res.Status, res.Header.Get("Retry-After"), res.Header.Get(retryhttp.RetrySignalHeader))
		}
	}}))
	defer toC.CloseIdleConnections()
	var atB atomic.Int64
	b := httptest.NewServer(inbound.Pushback(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		atB.Add(1)
		req, _ := http.NewRequestWithContext(r.Context(), http.MethodGet, c.URL, nil)
		res, err := toC.RoundTrip(req)
		if err != nil {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		res.Body.Close()
		w.Header().Set("Retry-After", res.Header.Get("Retry-After"))
		w.WriteHeader(res.StatusCode) // pass the failure on
	})))
	defer b.Close()

	toB := retryhttp.New(fast)
	defer toB.CloseIdleConnections()
	res, err := (&http.Client{Transport: toB}).Get(b.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	res.Body.Close()
	fmt.Printf("  B → client: %s, Retry-After: %s, Retry-Pushback: %q\n",
		res.Status, res.Header.Get("Retry-After"), res.Header.Get(retryhttp.RetrySignalHeader))
	fmt.Printf("  requests at B: %d (the client did not retry); at C: %d (B retried 3 times)\n", atB.Load(), atC.Load())
	close(release)
	<-held
}
