// Command breaker shows the circuit breaker opening on a failing backend,
// failing fast while open, probing after its open timeout, and closing
// when the backend has healed.
//
// It starts, on loopback, a backend that answers 503 until told to heal,
// and a Transport WithCircuitBreaker: 10 samples (logical requests) at 50%
// failures open the circuit, which stays open 200ms and then lets 3 probes
// through. Every state change is printed by a Hooks.OnCircuitStateChange
// hook.
//
// Run it with: go run ./examples/breaker
package main

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"time"

	"github.com/seed2409de8f/retryhttp"
)

func main() {
	var hits atomic.Int64
	var healthy atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		if !healthy.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ok")
	}))
	defer srv.Close()

	start := time.Now()
	tr := retryhttp.New(
		retryhttp.WithDelayFn(func(retryhttp.Attempt) time.Duration { return time.Millisecond }),
		retryhttp.WithCircuitBreaker(retryhttp.CircuitBreakerSettings{
			MinRequests: 10,
			OpenTimeout: 200 * time.Millisecond,
		}),
		retryhttp.WithHooks(retryhttp.Hooks{
			OnCircuitStateChange: func(host string, from, to retryhttp.CircuitState) {
				fmt.Printf("  [%4dms] circuit of %s: %s → %s\n", time.Since(start).Milliseconds(), host, from, to)
			},
		}),
	)
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}

	fmt.Println("The backend fails every request:")
	for i := 1; i <= 15; i++ {
		before := hits.Load()
		status, err := get(client, srv.URL)
		switch {
		case errors.Is(err, retryhttp.ErrCircuitOpen):
			fmt.Printf("  GET %2d: failed fast (%v), %d requests sent\n", i, err, hits.Load()-before)
		case err != nil:
			fmt.Printf("  GET %2d: %v\n", i, err)
		default:
			fmt.Printf("  GET %2d: %d after %d attempts\n", i, status, hits.Load()-before)
		}
	}

	fmt.Println("The backend heals; requests fail fast until the open timeout, then probes go through:")
	healthy.Store(true)
	fast := 0
	for {
		status, err := get(client, srv.URL)
		if err == nil {
			fmt.Printf("  %d GETs failed fast; then GET: %d (probe 1 of 3)\n", fast, status)
			break
		}
		fast++
		time.Sleep(20 * time.Millisecond)
	}
	for i := 2; i <= 5; i++ {
		status, err := get(client, srv.URL)
		if err != nil {
			fmt.Printf("  GET: %v\n", err)
			continue
		}
		if i <= 3 {
			fmt.Printf("  GET: %d (probe %d of 3)\n", status, i)
		} else {
			fmt.Printf("  GET: %d\n", status)
		}
	}
}

func get(c *http.Client, url string) (int, error) {
	res, err := c.Get(url)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res.StatusCode, nil
}
