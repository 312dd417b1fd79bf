package retryhttp_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/seed2409de8f/retryhttp"
)

// A dead backend drains its host's bucket: RetryBudget.Hosts shows the
// tokens left, what a gauge of the budget reports (otelretryhttp's
// ObserveRetryBudget). DefaultRetryBudget, or a Transport's RetryBudget,
// gives the budget of Transports made without WithRetryBudget.
func ExampleRetryBudget_Hosts() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	budget := retryhttp.NewRetryBudget(retryhttp.RetryBudgetOptions{Capacity: 2, NoParking: true})
	tr := retryhttp.New(retryhttp.WithRetryBudget(budget), retryhttp.WithDelayFn(func(retryhttp.Attempt) time.Duration { return 0 }))
	defer tr.CloseIdleConnections()

	res, err := (&http.Client{Transport: tr}).Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	res.Body.Close()
	for h := range tr.RetryBudget().Hosts() {
		fmt.Printf("%d; tokens left %.0f of %d; parked %d\n", res.StatusCode, h.Tokens, h.Capacity, h.Parked)
	}
	// Output:
	// 503; tokens left 0 of 2; parked 0
}
