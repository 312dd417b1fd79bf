package retryhttp_test

import (
	"fmt"
	"net/http"
	"time"

	"github.com/seed2409de8f/retryhttp"
	"github.com/seed2409de8f/retryhttp/retryhttptest"
)

// A fake clock makes the transport's waits return at once and records
// them: a test of the retry settings takes milliseconds, whatever the
// Retry-After.
func ExampleWithClock() {
	srv := retryhttptest.NewServer(nil,
		retryhttptest.TooManyRequests(30*time.Second),
		retryhttptest.Status(http.StatusOK),
	)
	defer srv.Close()
	clock := retryhttptest.NewClock(time.Now())
	exact := retryhttp.CustomizedDelayFn(retryhttp.CustomizedDelayFnOptions{JitterMagnitude: -1})
	tr := retryhttp.New(retryhttp.WithClock(clock), retryhttp.WithDelayFn(exact))
	defer tr.CloseIdleConnections()

	start := time.Now()
	res, err := (&http.Client{Transport: tr}).Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	res.Body.Close()
	fmt.Println(res.Status, clock.Sleeps(), time.Since(start) < 10*time.Second)
	// Output: 200 OK [30s] true
}
