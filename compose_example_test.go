package retryhttp_test

import (
	"fmt"
	"net/http"

	"github.com/seed2409de8f/retryhttp"
)

// Conditions are added to the default rules, not written around them: 504
// joins 502 and 503, and a RetryIf condition retries a 500 that says it is
// transient. A 2xx is still never retried, whatever RetryIf says.
func ExampleCustomizedShouldRetryFnOptions_retryIf() {
	shouldRetry := retryhttp.CustomizedShouldRetryFn(retryhttp.CustomizedShouldRetryFnOptions{
		AdditionalStatusCodes: []int{http.StatusGatewayTimeout},
		RetryIf: func(a retryhttp.Attempt) bool {
			return a.Res != nil && a.Res.Header.Get("X-Transient") == "true"
		},
	})
	get, _ := http.NewRequest(http.MethodGet, "http://example.test/", nil)
	for _, res := range []*http.Response{
		{StatusCode: 503, Header: http.Header{}},
		{StatusCode: 504, Header: http.Header{}},
		{StatusCode: 500, Header: http.Header{}},
		{StatusCode: 500, Header: http.Header{"X-Transient": {"true"}}},
		{StatusCode: 202, Header: http.Header{"X-Transient": {"true"}, "Retry-After": {"1"}}},
	} {
		a := retryhttp.Attempt{Count: 1, Req: get, Res: res}
		fmt.Println(res.StatusCode, res.Header.Get("X-Transient"), shouldRetry(a))
	}
	// Output:
	// 503  true
	// 504  true
	// 500  false
	// 500 true true
	// 202 true false
}
