package inbound_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"github.com/seed2409de8f/retryhttp"
	"github.com/seed2409de8f/retryhttp/inbound"
)

// A server that handles one request at once: the excess is refused at once
// with 503 and a Retry-After of 1 or 2 seconds, while health checks always
// pass.
func ExampleLoadShedder() {
	shedder := inbound.NewLoadShedder(inbound.LoadShedderOptions{
		Limit:    1,
		MustPass: func(r *http.Request) bool { return r.URL.Path == "/healthz" },
	})
	started, release := make(chan struct{}), make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		close(started)
		<-release
		_, _ = io.WriteString(w, "done")
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") })
	srv := httptest.NewServer(shedder.Handler(mux))
	defer srv.Close()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}

	slow := make(chan string)
	go func() {
		res, err := client.Get(srv.URL + "/slow")
		if err != nil {
			slow <- err.Error()
			return
		}
		res.Body.Close()
		slow <- res.Status
	}()
	<-started // the one slot is taken

	for _, path := range []string{"/", "/healthz"} {
		res, err := client.Get(srv.URL + path)
		if err != nil {
			fmt.Println(err)
			return
		}
		res.Body.Close()
		ra := res.Header.Get("Retry-After")
		fmt.Printf("%s: %s, Retry-After 1 or 2: %v, Retry-Pushback: %q\n",
			path, res.Status, ra == "1" || ra == "2", res.Header.Get(retryhttp.RetrySignalHeader))
	}
	close(release)
	fmt.Println("/slow:", <-slow)
	fmt.Printf("%+v\n", shedder.Stats())
	// Output:
	// /: 503 Service Unavailable, Retry-After 1 or 2: true, Retry-Pushback: ""
	// /healthz: 200 OK, Retry-After 1 or 2: false, Retry-Pushback: ""
	// /slow: 200 OK
	// {Limit:1 InFlight:0 Queued:0 Admitted:2 Shed:1 Late:0}
}
