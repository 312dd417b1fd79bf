package retryhttp_test

import (
	"fmt"
	"net/http"
	"time"

	"github.com/seed2409de8f/retryhttp"
)

// A 429 that says when its quota resets, in the IETF RateLimit field, is
// retried after that wait (here 10s, moved by up to ±1/3); Retry-After,
// when present, would win.
func ExampleDefaultDelayFn_rateLimitReset() {
	res := &http.Response{
		StatusCode: http.StatusTooManyRequests,
		Header: http.Header{
			"Ratelimit":        {`"default";r=0;t=10`},
			"Ratelimit-Policy": {`"default";q=100;w=60`},
		},
	}
	d := retryhttp.DefaultDelayFn(retryhttp.Attempt{Count: 1, Res: res})
	fmt.Println(d >= 6666*time.Millisecond && d <= 13334*time.Millisecond)
	// Output: true
}
