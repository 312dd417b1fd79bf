package destinations_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync/atomic"

	"github.com/seed2409de8f/retryhttp"
	"github.com/seed2409de8f/retryhttp/destinations"
)

// exampleDownServer answers 503 to every request and counts them.
func exampleDownServer() (*httptest.Server, *atomic.Int32) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	return srv, &n
}

// One Transport, a policy per destination: the payments backend is never
// retried, the search backend is retried once with short waits, and any
// other host gets the file's defaults.
func Example() {
	payments, paymentsAttempts := exampleDownServer()
	defer payments.Close()
	search, searchAttempts := exampleDownServer()
	defer search.Close()
	other, otherAttempts := exampleDownServer()
	defer other.Close()
	host := func(s *httptest.Server) string { u, _ := url.Parse(s.URL); return u.Host }

	// Usually a file, read with (*Table).LoadFile.
	cfg, err := destinations.Parse([]byte(fmt.Sprintf(`{
		"defaults": {"maxRetries": 2, "backoff": {"base": "1ms"}},
		"destinations": [
			{"name": "payments", "host": %q, "maxRetries": 0},
			{"name": "search", "host": %q, "maxRetries": 1, "budget": "off"}
		]
	}`, host(payments), host(search))))
	if err != nil {
		fmt.Println(err)
		return
	}
	table, err := destinations.New(cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	tr := retryhttp.New(retryhttp.WithPolicyFunc(table.Policy))
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}

	for _, u := range []string{payments.URL, search.URL, other.URL} {
		if res, err := client.Get(u); err == nil {
			res.Body.Close()
		}
	}
	fmt.Println("payments:", paymentsAttempts.Load())
	fmt.Println("search:", searchAttempts.Load())
	fmt.Println("other:", otherAttempts.Load())
	// Output:
	// payments: 1
	// search: 2
	// other: 3
}

// A destinations file with a mistake is refused as a whole, and the error
// says where the mistake is.
func ExampleParse() {
	_, err := destinations.Parse([]byte(`{
		"destinations": [
			{"host": "payments.internal", "maxRetries": 0},
			{"host": "*.search.internal", "backof": {"base": "50ms"}},
			{"host": "legacy.internal", "backoff": {"base": "-1s"}}
		]
	}`))
	fmt.Println(err)
	// Output:
	// retryhttp: destinations[1].backof: unknown key (known keys: name, host, maxRetries, backoff, attemptTimeout, hedging, retryableStatusCodes, budget, holdDuringPause)
	// retryhttp: destinations[2].backoff.base: must be a positive duration, got "-1s"
}
