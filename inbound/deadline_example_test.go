package inbound_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/seed2409de8f/retryhttp"
	"github.com/seed2409de8f/retryhttp/inbound"
)

// A service whose handler's context ends when its caller stops waiting, so
// that its own calls through a Transport inherit the caller's deadline. Its
// LoadShedder, inside Deadline, refuses at once a caller whose time is up.
func ExampleDeadline() {
	shedder := inbound.NewLoadShedder(inbound.LoadShedderOptions{})
	service := httptest.NewServer(inbound.Deadline(shedder.Handler(http.HandlerFunc(
		func(w http.ResponseWriter, r *http.Request) {
			deadline, ok := r.Context().Deadline()
			fmt.Println("deadline within 2s:", ok && time.Until(deadline) <= 2*time.Second)
		}))))
	defer service.Close()

	client := &http.Client{Transport: retryhttp.New(retryhttp.WithDeadlineHeader(true))}
	defer client.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, service.URL, nil)
	if res, err := client.Do(req); err == nil {
		res.Body.Close()
	}

	// A caller already out of time, as a proxy might forward it.
	req, _ = http.NewRequest(http.MethodGet, service.URL, nil)
	req.Header.Set(retryhttp.DeadlineHeader, "0")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	res.Body.Close()
	http.DefaultClient.CloseIdleConnections()
	fmt.Println(res.StatusCode, res.Header.Get(retryhttp.RetrySignalHeader), shedder.Stats().Late)
	// Output:
	// deadline within 2s: true
	// 503 no-retry 1
}

// What a server reads from the header: hostile values are ignored.
func ExampleTimeLeft() {
	for _, v := range []string{"250", "0", "-1", "5ms", "100000000"} {
		left, ok := inbound.TimeLeft(http.Header{retryhttp.DeadlineHeader: {v}})
		fmt.Printf("%q: %v %v\n", v, left, ok)
	}
	// Output:
	// "250": 250ms true
	// "0": 0s true
	// "-1": 0s false
	// "5ms": 0s false
	// "100000000": 0s false
}
