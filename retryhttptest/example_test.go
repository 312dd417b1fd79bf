package retryhttptest_test

import (
	"fmt"
	"net/http"
	"time"

	"github.com/seed2409de8f/retryhttp"
	"github.com/seed2409de8f/retryhttp/retryhttptest"
)

// Testing a retry configuration: a server that fails twice, a fake clock
// that skips the waits. In a test, pass t instead of nil and the server is
// closed when the test ends.
func ExampleFailThenSucceed() {
	srv := retryhttptest.FailThenSucceed(nil, 2, http.StatusServiceUnavailable)
	defer srv.Close()
	clock := retryhttptest.NewClock(time.Now())
	tr := retryhttp.New(retryhttp.WithClock(clock))
	defer tr.CloseIdleConnections()

	res, err := (&http.Client{Transport: tr}).Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	res.Body.Close()
	fmt.Println(res.Status)
	fmt.Println("requests:", srv.Requests())
	fmt.Println("waits:", len(clock.Sleeps()), "below 750ms:", clock.Slept() < 750*time.Millisecond)
	// Output:
	// 200 OK
	// requests: 3
	// waits: 2 below 750ms: true
}

// A scripted server: a reset connection, a 429 asking for 2s, then success.
// The GET survives all of it, and the clock shows the wait the 429 asked
// for, without the test waiting.
func ExampleNewServer() {
	srv := retryhttptest.NewServer(nil,
		retryhttptest.Reset(),
		retryhttptest.TooManyRequests(2*time.Second),
		retryhttptest.Status(http.StatusOK),
	)
	defer srv.Close()
	clock := retryhttptest.NewClock(time.Now())
	tr := retryhttp.New(retryhttp.WithClock(clock))
	defer tr.CloseIdleConnections()

	res, err := (&http.Client{Transport: tr}).Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	res.Body.Close()
	waits := clock.Sleeps()
	fmt.Println(res.Status, srv.Requests())
	fmt.Println("second wait within 2s ± 1/3:", waits[1] >= 1333*time.Millisecond && waits[1] <= 2667*time.Millisecond)
	// Output:
	// 200 OK 3
	// second wait within 2s ± 1/3: true
}

// Hang holds a request until the attempt times out; the retry then gets an
// answer.
func ExampleHang() {
	srv := retryhttptest.NewServer(nil, retryhttptest.Hang(), retryhttptest.Status(http.StatusOK))
	defer srv.Close()
	tr := retryhttp.New(
		retryhttp.WithClock(retryhttptest.NewClock(time.Now())),
		retryhttp.WithAttemptTimeout(50*time.Millisecond),
	)
	defer tr.CloseIdleConnections()

	res, err := (&http.Client{Transport: tr}).Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	res.Body.Close()
	fmt.Println(res.Status, srv.Requests())
	// Output: 200 OK 2
}

// A manual clock moves only when the test says: a timer made on it (by a
// Transport's waits, attempt timeouts or hedge delays, or directly as
// here) fires when Advance passes its time.
func ExampleNewManualClock() {
	clock := retryhttptest.NewManualClock(time.Unix(0, 0))
	fire, _ := clock.NewTimer(time.Second)

	clock.Advance(500 * time.Millisecond)
	select {
	case <-fire:
		fmt.Println("fired too early")
	default:
		fmt.Println("after 500ms: waiting")
	}
	clock.Advance(500 * time.Millisecond)
	<-fire
	fmt.Println("after 1s: fired")
	// Output:
	// after 500ms: waiting
	// after 1s: fired
}
