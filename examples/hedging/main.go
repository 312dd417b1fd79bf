// Command hedging shows how hedging cuts tail latency, and what it costs.
//
// It starts, on loopback, a server whose first answer to each request is
// slow (250ms, as when a request lands on a replica that is paused by a
// garbage collection or stuck behind a slow query) while any further copy of
// the same request is answered at once.
//
// The client fetches the same six items twice:
//  1. without hedging: every request waits for its slow first answer;
//  2. with WithHedging(30ms, 1): when no answer has come after 30ms, a
//     second copy is sent, its answer wins, and the slow first attempt is
//     cancelled (the server sees the cancellation).
//
// For each run it prints the latency of every request and the number of
// attempts the server received: hedging trades extra load for latency.
//
// Run it with: go run ./examples/hedging
package main

import (
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seed2409de8f/retryhttp"
)

const slow = 250 * time.Millisecond

// server answers the first attempt at each path slowly, the others at once.
type server struct {
	mu        sync.Mutex
	seen      map[string]bool
	attempts  atomic.Int32
	cancelled atomic.Int32
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.attempts.Add(1)
	s.mu.Lock()
	first := !s.seen[r.URL.Path]
	s.seen[r.URL.Path] = true
	s.mu.Unlock()
	if first {
		timer := time.NewTimer(slow)
		defer timer.Stop()
		select {
		case <-timer.C:
		case <-r.Context().Done():
			s.cancelled.Add(1) // the client gave up on this attempt
			return
		}
	}
	fmt.Fprintf(w, "item %s", r.URL.Path)
}

func main() {
	s := &server{seen: map[string]bool{}}
	srv := httptest.NewServer(s)
	defer srv.Close()

	fmt.Println("1. without hedging:")
	run(srv.URL+"/plain", s, retryhttp.New())

	fmt.Println("2. with hedging after 30ms, at most one hedge:")
	run(srv.URL+"/hedged", s, retryhttp.New(retryhttp.WithHedging(30*time.Millisecond, 1)))
}

// run fetches six items through tr and reports latencies and server load.
func run(base string, s *server, tr *retryhttp.Transport) {
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	s.attempts.Store(0)
	s.cancelled.Store(0)
	var total time.Duration
	const n = 6
	for i := 1; i <= n; i++ {
		start := time.Now()
		res, err := client.Get(fmt.Sprintf("%s/%d", base, i))
		if err != nil {
			log.Fatal(err)
		}
		body, err := io.ReadAll(res.Body)
		res.Body.Close()
		if err != nil {
			log.Fatal(err)
		}
		d := time.Since(start)
		total += d
		fmt.Printf("   %-14s %v\n", body, d.Round(time.Millisecond))
	}
	time.Sleep(10 * time.Millisecond) // let the server notice the last cancellation
	fmt.Printf("   mean latency %v; the server received %d attempts for %d requests (%d cancelled)\n\n",
		(total / n).Round(time.Millisecond), s.attempts.Load(), n, s.cancelled.Load())
}
