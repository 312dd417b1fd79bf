package retryhttp_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"

	"github.com/seed2409de8f/retryhttp"
)

// A server that pins a session with a cookie on its 503: the retry carries
// the cookie, because the transport shares the client's jar.
func ExampleWithCookieJar() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := r.Cookie("session"); err != nil {
			http.SetCookie(w, &http.Cookie{Name: "session", Value: "s1"})
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "hello")
	}))
	defer srv.Close()

	jar, _ := cookiejar.New(nil)
	tr := retryhttp.New(noWait, retryhttp.WithCookieJar(jar))
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Jar: jar}

	res, err := client.Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	fmt.Println(res.Status, string(body))
	// Output:
	// 200 OK hello
}
