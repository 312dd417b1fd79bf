// Package retryhttptest helps test code that uses retryhttp: loopback
// servers that fail as real servers do (a status N times, a reset
// connection, a request that hangs, a 429 with Retry-After, any scripted
// sequence), counting and recording the requests they get, and a fake Clock
// that skips the transport's waits while recording them, or moves only when
// the test says.
//
// A test of a retry configuration then runs in milliseconds, with real
// connections, and can assert how many attempts were sent and how long the
// transport would have waited:
//
//	srv := retryhttptest.FailThenSucceed(t, 2, http.StatusServiceUnavailable)
//	clock := retryhttptest.NewClock(time.Now())
//	tr := retryhttp.New(retryhttp.WithClock(clock))
//	res, err := (&http.Client{Transport: tr}).Get(srv.URL)
//	// srv.Requests() == 3; clock.Sleeps() holds the two waits.
//
// Servers given a testing.TB are closed when the test ends. docs/testing.md
// in the module describes the kit and what the fake clock governs.
package retryhttptest
