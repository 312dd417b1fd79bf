// Command crosshop shows how the cross-hop signal keeps a chain of retrying
// services from multiplying the retries of a dead backend.
//
// It starts, on loopback, a five-hop chain client → S1 → S2 → S3 → S4 → S5:
// S1 to S4 call the next server through a retryhttp Transport and pass on
// the status they get; S5 answers every request with 503. It sends GETs
// through the chain three times, with a fresh chain each time:
//  1. naive: every Transport with its budget off and the signal off
//     (WithRetryBudget(nil), WithRetrySignal(false)): every hop retries
//     every failure, 4^5 = 1,024 requests at S5 per client request (3^5 =
//     243 with 3 attempts per hop, WithMaxRetries(2));
//  2. budget only: Transports with their defaults, no inbound.Pushback on
//     the servers: each hop spends its 10 retries, and its parked retries
//     send a few probes (at most 9) before the dead host's retries are
//     refused at once, so S5 sees at most n + 5·19;
//  3. budget and signal: the same, with inbound.Pushback on every
//     server: S4 retries, gives up and says so; S3, S2, S1 and the client
//     pass the failure on without retrying it, so S5 sees at most n + 19.
//
// Run it with: go run ./examples/crosshop
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
	"github.com/seed2409de8f/retryhttp/inbound"
)

const hops = 5

func main() {
	noWait := retryhttp.WithDelayFn(func(retryhttp.Attempt) time.Duration { return 0 })
	naive := []retryhttp.Option{noWait, retryhttp.WithRetryBudget(nil), retryhttp.WithRetrySignal(false)}
	defaults := []retryhttp.Option{noWait}

	fmt.Println("client → S1 → S2 → S3 → S4 → S5 (dead: every request gets 503)")
	fmt.Println()
	fmt.Printf("%-18s %8s  %-36s %s\n", "", "requests", "requests seen by S1 … S5", "S5 per client request")
	run("naive", naive, false, 2)
	run("naive, 3 attempts", append(naive, retryhttp.WithMaxRetries(2)), false, 2)
	run("budget only", defaults, false, 1000)
	run("budget and signal", defaults, true, 1000)
}

// run builds a chain whose Transports have opts (and whose servers have
// inbound.Pushback if pushback), sends n GETs through it from 8
// goroutines, and prints what each server saw.
func run(name string, opts []retryhttp.Option, pushback bool, n int) {
	var hits [hops]atomic.Int64
	wrap := func(i int, h http.HandlerFunc) http.Handler {
		count := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			hits[i].Add(1)
			h(w, r)
		})
		if pushback {
			return inbound.Pushback(count)
		}
		return count
	}
	var stop []func()
	defer func() {
		for i := len(stop) - 1; i >= 0; i-- {
			stop[i]()
		}
	}()

	tail := httptest.NewServer(wrap(hops-1, func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	stop = append(stop, tail.Close)
	next := tail.URL
	for i := hops - 2; i >= 0; i-- {
		tr := retryhttp.New(opts...)
		target := next
		srv := httptest.NewServer(wrap(i, func(w http.ResponseWriter, r *http.Request) {
			req, _ := http.NewRequestWithContext(r.Context(), http.MethodGet, target, nil)
			res, err := tr.RoundTrip(req)
			if err != nil {
				w.WriteHeader(http.StatusBadGateway)
				return
			}
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			w.WriteHeader(res.StatusCode)
		}))
		stop = append(stop, tr.CloseIdleConnections, srv.Close)
		next = srv.URL
	}

	client := retryhttp.New(opts...)
	stop = append(stop, client.CloseIdleConnections)
	c := &http.Client{Transport: client}
	var sent atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for sent.Add(1) <= int64(n) {
				res, err := c.Get(next)
				if err != nil {
					fmt.Println("error:", err)
					return
				}
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
			}
		}()
	}
	wg.Wait()

	seen := ""
	for i := range hits {
		seen += fmt.Sprintf("%6d", hits[i].Load())
	}
	fmt.Printf("%-18s %8d  %-36s %8.3f\n", name, n, seen, float64(hits[hops-1].Load())/float64(n))
}
