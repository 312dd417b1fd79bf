package retryhttp_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"time"

	"github.com/seed2409de8f/retryhttp"
)

// Hedging a slow backend: the first attempt hangs, so after 10ms the
// transport sends a second one alongside it; the second answers, wins, and
// the first is cancelled.
func ExampleWithHedging() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The first attempt (hedges carry AttemptHeader) hangs until the
		// transport cancels it, whichever arrives first.
		if r.Header.Get(retryhttp.AttemptHeader) == "" {
			<-r.Context().Done()
			return
		}
		fmt.Fprint(w, "fast")
	}))
	defer srv.Close()

	tr := retryhttp.New(retryhttp.WithHedging(10*time.Millisecond, 1))
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}

	res, err := client.Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	fmt.Println(res.StatusCode, string(body), "attempt", retryhttp.AttemptFromRequest(res.Request))
	// Output:
	// 200 fast attempt 2
}

// Hedging that follows the destination's latency: no delay is set by hand.
// The first 80 requests fill the host's window (the 95th percentile needs
// that many first attempts) and are not hedged; then a request whose first
// attempt hangs gets a hedge after about the host's 95th percentile
// latency, a millisecond or two here, and the hedge wins.
func ExampleWithAdaptiveHedging() {
	var hang atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Once hang is set, a first attempt (hedges carry AttemptHeader)
		// hangs until the transport cancels it.
		if hang.Load() && r.Header.Get(retryhttp.AttemptHeader) == "" {
			<-r.Context().Done()
			return
		}
		fmt.Fprint(w, "fast")
	}))
	defer srv.Close()

	tr := retryhttp.New(retryhttp.WithAdaptiveHedging(0.95, 1))
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	get := func() (string, int) {
		res, err := client.Get(srv.URL)
		if err != nil {
			return err.Error(), 0
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		return string(body), retryhttp.AttemptFromRequest(res.Request)
	}

	for range 80 {
		get()
	}
	hang.Store(true)
	fmt.Println(get())
	// Output:
	// fast 2
}
