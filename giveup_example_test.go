package retryhttp_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/seed2409de8f/retryhttp"
)

// Code moved from go-retryablehttp may expect an error when retries give
// up; WithErrorOnGiveUp gives it one, carrying the last status.
func ExampleWithErrorOnGiveUp() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()

	tr := retryhttp.New(noWait, retryhttp.WithErrorOnGiveUp(true))
	defer tr.CloseIdleConnections()

	res, err := (&http.Client{Transport: tr}).Get(srv.URL)
	fmt.Println(res == nil)
	fmt.Println(errors.Is(err, retryhttp.ErrRetriesExhausted))
	var g *retryhttp.GiveUpError
	if errors.As(err, &g) {
		fmt.Println(g)
		fmt.Println(g.StatusCode, g.Attempts)
	}
	// Output:
	// true
	// true
	// retryhttp: giving up after 4 attempts: last status 503 Service Unavailable
	// 503 4
}
