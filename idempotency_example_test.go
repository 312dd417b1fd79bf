package retryhttp_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"

	"github.com/seed2409de8f/retryhttp"
)

// A POST retried after a 503, with the key the transport injected: the same
// on both attempts, under the header the server expects. Honored tells the
// transport that the server answers a replayed key without charging twice;
// without it, the POST would not be retried after a 503.
func ExampleWithIdempotencyKeys() {
	var mu sync.Mutex
	keys := map[string]int{} // the server's view: attempts per key
	var attempts int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		attempts++
		keys[r.Header.Get("X-Idempotency-Key")]++
		if attempts == 1 {
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

	res, err := (&http.Client{Transport: tr}).Post(srv.URL, "text/plain", strings.NewReader("card-1 $10"))
	if err != nil {
		fmt.Println(err)
		return
	}
	res.Body.Close()
	mu.Lock()
	defer mu.Unlock()
	for key, n := range keys {
		fmt.Printf("status %d after %d attempts, all %d with one key (a UUID: %v)\n",
			res.StatusCode, attempts, n, len(key) == 36)
	}
	// Output:
	// status 200 after 2 attempts, all 2 with one key (a UUID: true)
}
