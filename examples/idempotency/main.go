// Command idempotency shows why idempotency keys make a retried POST safe.
//
// It starts, on loopback, a payment server that stores the result of each
// request under its Idempotency-Key and replays it when the same key comes
// again. The server charges the card and then fails with 503 on the first
// attempt of every request, as a server does when it crashes after doing the
// work but before answering.
//
// The client sends the same POST twice:
//  1. through a transport that injects keys and is told the server honours
//     them (IdempotencyKeys{Honored: true}): the POST is retried after the 503,
//     the server recognises the key, and the card is charged once;
//  2. through a naive transport that retries POSTs on 503 without keys: the
//     card is charged twice.
//
// Run it with: go run ./examples/idempotency
package main

import (
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"

	"github.com/seed2409de8f/retryhttp"
)

// paymentServer charges once per idempotency key.
type paymentServer struct {
	mu      sync.Mutex
	charges int               // effects: cards charged
	results map[string]string // key → stored answer
	seen    map[string]bool   // request bodies seen once (to fail the first attempt)
}

func (s *paymentServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	key := r.Header.Get("Idempotency-Key")
	s.mu.Lock()
	defer s.mu.Unlock()

	if key != "" {
		if res, ok := s.results[key]; ok {
			fmt.Printf("  server: key %s… seen before, replaying the stored result\n", key[:8])
			_, _ = io.WriteString(w, res)
			return
		}
	}
	s.charges++
	res := fmt.Sprintf("charged %s (charge #%d)", body, s.charges)
	fmt.Printf("  server: %s, key %q\n", res, short(key))
	if key != "" {
		s.results[key] = res
	}
	if !s.seen[string(body)] { // the first attempt dies before answering
		s.seen[string(body)] = true
		fmt.Println("  server: crashed before answering: 503")
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	_, _ = io.WriteString(w, res)
}

func short(key string) string {
	if len(key) > 8 {
		return key[:8] + "…"
	}
	return key
}

func main() {
	ps := &paymentServer{results: map[string]string{}, seen: map[string]bool{}}
	srv := httptest.NewServer(ps)
	defer srv.Close()
	noWait := retryhttp.WithDelayFn(func(retryhttp.Attempt) time.Duration { return 10 * time.Millisecond })

	fmt.Println("1. retryhttp with idempotency keys, server known to honour them:")
	safe := &http.Client{Transport: retryhttp.New(noWait, retryhttp.WithIdempotencyKeys(retryhttp.IdempotencyKeys{Honored: true}))}
	post(safe, srv.URL, "card-1 $10")
	fmt.Printf("   → card-1 charged %d time(s)\n\n", ps.charges)

	before := ps.charges
	fmt.Println("2. a naive client that retries every POST on 503, without keys:")
	naive := &http.Client{Transport: retryhttp.New(noWait,
		retryhttp.WithIdempotencyKeys(retryhttp.IdempotencyKeys{Disabled: true}),
		retryhttp.WithShouldRetryFn(func(a retryhttp.Attempt) bool {
			return a.Res != nil && a.Res.StatusCode == http.StatusServiceUnavailable
		}))}
	post(naive, srv.URL, "card-2 $10")
	fmt.Printf("   → card-2 charged %d time(s)\n", ps.charges-before)
}

func post(c *http.Client, url, body string) {
	res, err := c.Post(url, "text/plain", strings.NewReader(body))
	if err != nil {
		log.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	fmt.Printf("  client: %d %s\n", res.StatusCode, b)
}
