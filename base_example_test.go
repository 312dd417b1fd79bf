package retryhttp_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/seed2409de8f/retryhttp"
)

// headerTransport sets a header on every request it sends, then sends it
// through next.
type headerTransport struct {
	next        http.RoundTripper
	name, value string
}

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context()) // a RoundTripper must not modify its request
	r.Header.Set(h.name, h.value)
	return h.next.RoundTrip(r)
}

// WithTransport puts a RoundTripper below the retries, where it sees every
// attempt: here one that sets a header, wrapping DefaultBaseTransport so as
// to keep the process's shared connection pool (and go-cleanhttp's
// settings). Each attempt carries the header, and the second carries
// Retry-Attempt too.
func ExampleWithTransport() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Printf("server: token=%s attempt=%d\n", r.Header.Get("X-Token"), retryhttp.AttemptFromRequest(r))
		if retryhttp.AttemptFromRequest(r) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()

	tr := retryhttp.New(
		retryhttp.WithTransport(headerTransport{next: retryhttp.DefaultBaseTransport(), name: "X-Token", value: "s3cr3t"}),
		retryhttp.WithDelayFn(func(retryhttp.Attempt) time.Duration { return 0 }),
	)
	res, err := (&http.Client{Transport: tr}).Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	res.Body.Close()
	fmt.Println(res.Status)
	// Output:
	// server: token=s3cr3t attempt=1
	// server: token=s3cr3t attempt=2
	// 200 OK
}
