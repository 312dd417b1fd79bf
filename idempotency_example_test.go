package retryhttp_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"time"

	"github.com/seed2409de8f/retryhttp"
)

// A POST retried after a 503, with the key the transport injected: the same
// on both attempts, under the header the server expects. Honored tells the
// transport that the server answers a replayed key without charging twice;
// without it, the POST would not be retried after a 503.
func ExampleWithIdempotencyKeys() {
	var attempts atomic.Int32
	keys := make(chan string, 8) // the key of each attempt, as the server saw it
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		keys <- r.Header.Get("X-Idempotency-Key")
		if attempts.Add(1) == 1 {
			http.Error(w, "try again", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "charged")
	}))
	defer srv.Close()

	tr := retryhttp.New(
		retryhttp.WithIdempotencyKeys(retryhttp.IdempotencyKeys{Header: "X-Idempotency-Key", Honored: true}),
		retryhttp.WithDelayFn(func(retryhttp.Attempt) time.Duration { return time.Millisecond }),
	)
	defer tr.CloseIdleConnections()

	res, err := (&http.Client{Transport: tr}).Post(srv.URL, "text/plain", nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	res.Body.Close()
	first, second := <-keys, <-keys
	fmt.Printf("status %d after %d attempts; same key: %v; a UUID: %v\n",
		res.StatusCode, attempts.Load(), first == second, len(first) == 36)
	// Output:
	// status 200 after 2 attempts; same key: true; a UUID: true
}
