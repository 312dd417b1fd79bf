package retryhttp_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"time"

	"github.com/seed2409de8f/retryhttp"
)

// A client that tells the server how long it still waits: the request's
// context has 2s left, so the attempt says at most 2000 ms.
func ExampleWithDeadlineHeader() {
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		ms, _ := strconv.Atoi(r.Header.Get(retryhttp.DeadlineHeader))
		fmt.Println("the caller waits at most 2s:", ms > 1000 && ms <= 2000)
	}))
	defer srv.Close()

	tr := retryhttp.New(retryhttp.WithDeadlineHeader(true))
	defer tr.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	res, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	res.Body.Close()
	// Output:
	// the caller waits at most 2s: true
}
