package retryhttp_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/seed2409de8f/retryhttp"
)

// A retry gets a fresh token: the hook rewrites the transport's copy of the
// request, and the caller's request keeps its header.
func ExampleWithPrepareRetry() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer fresh" {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "hello")
	}))
	defer srv.Close()

	tr := retryhttp.New(
		noWait,
		retryhttp.WithPrepareRetry(func(r *http.Request) error {
			r.Header.Set("Authorization", "Bearer fresh") // say, from a token source
			return nil
		}),
	)
	defer tr.CloseIdleConnections()

	req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
	req.Header.Set("Authorization", "Bearer stale")
	res, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	fmt.Println(res.Status, string(body))
	fmt.Println("caller's header:", req.Header.Get("Authorization"))
	// Output:
	// 200 OK hello
	// caller's header: Bearer stale
}

// noWait makes the examples' retries immediate.
var noWait = retryhttp.WithDelayFn(func(retryhttp.Attempt) time.Duration { return 0 })
