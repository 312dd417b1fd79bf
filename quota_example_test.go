package retryhttp_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/seed2409de8f/retryhttp"
	"github.com/seed2409de8f/retryhttp/retryhttptest"
)

// A host that keeps one quota per model, stated in the LLM APIs' fields:
// WithQuotaScope names each request's model, so that the quota of one
// model holds only its own requests. Here each model may send 2 requests
// per minute; the third request to model-a waits for its window (on a fake
// clock, so the example takes no time), while model-b's go at once.
func ExampleWithQuotaScope() {
	clock := retryhttptest.NewClock(time.Now())
	start := clock.Now()
	var mu sync.Mutex
	used := map[string]int{} // requests per model and window
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		elapsed := clock.Now().Sub(start)
		key := fmt.Sprint(r.URL.Query().Get("model"), elapsed/time.Minute)
		used[key]++
		w.Header().Set("X-RateLimit-Limit-Requests", "2")
		w.Header().Set("X-RateLimit-Remaining-Requests", strconv.Itoa(max(2-used[key], 0)))
		w.Header().Set("X-RateLimit-Reset-Requests", (time.Minute - elapsed%time.Minute).String())
		if used[key] > 2 {
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		fmt.Fprint(w, "ok")
	}))
	defer srv.Close()

	client := &http.Client{Transport: retryhttp.New(
		retryhttp.WithClock(clock),
		retryhttp.WithQuotaScope(func(r *http.Request) string { return r.URL.Query().Get("model") }),
		retryhttp.WithHooks(retryhttp.Hooks{OnQuotaHold: func(h retryhttp.QuotaHold) {
			model := h.Scope[strings.IndexByte(h.Scope, '#')+1:]
			fmt.Printf("%s held for %v\n", model, h.Wait.Round(time.Second))
		}}),
	)}
	for _, m := range []string{"model-a", "model-a", "model-b", "model-a"} {
		res, err := client.Get(srv.URL + "/v1/chat?model=" + m)
		if err != nil {
			fmt.Println(err)
			return
		}
		res.Body.Close()
		fmt.Println(m, res.StatusCode)
	}
	// Output:
	// model-a 200
	// model-a 200
	// model-b 200
	// model-a held for 1m0s
	// model-a 200
}

// A server whose quota is spent until its window turns in an hour: the
// next request is not sent, and fails at once with a *QuotaWaitError that
// carries the wait the server stated, rather than sleep past the caller's
// patience (WithMaxDelay, 60s by default, or its deadline).
func ExampleQuotaWaitError() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("RateLimit-Policy", `"hourly";q=1;w=3600`)
		w.Header().Set("RateLimit", `"hourly";r=0;t=3600`)
		fmt.Fprint(w, "ok")
	}))
	defer srv.Close()
	client := &http.Client{Transport: retryhttp.New()}

	res, err := client.Get(srv.URL) // spends the quota
	if err != nil {
		fmt.Println(err)
		return
	}
	res.Body.Close()
	fmt.Println("first:", res.StatusCode)

	_, err = client.Get(srv.URL)
	var qe *retryhttp.QuotaWaitError
	fmt.Println("second sent:", !errors.As(err, &qe))
	fmt.Println("quota exhausted:", errors.Is(err, retryhttp.ErrQuotaExhausted))
	fmt.Println("window turns in about:", qe.Wait.Round(time.Hour))
	// Output:
	// first: 200
	// second sent: false
	// quota exhausted: true
	// window turns in about: 1h0m0s
}
