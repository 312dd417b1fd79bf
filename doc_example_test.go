package retryhttp_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/seed2409de8f/retryhttp"
)

// Example is the package's quick start against a local server that answers
// 503 once, then "hello": the defaults retry the GET after a short jittered
// wait (under 250ms) and the caller sees only the success.
func Example() {
	srv, attempts := exampleFlakyServer(1, http.StatusServiceUnavailable)
	defer srv.Close()

	tr := retryhttp.New() // up to 3 retries, only when safe
	defer tr.CloseIdleConnections()
	client := &http.Client{
		Transport: tr,
		Timeout:   30 * time.Second, // bounds all attempts and waits together
	}

	res, err := client.Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Status, strings.TrimSpace(string(body)))
	fmt.Println("attempts:", attempts.Load())
	// Output:
	// 200 OK hello
	// attempts: 2
}
