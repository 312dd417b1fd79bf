package retryhttp_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"github.com/seed2409de8f/retryhttp"
)

// A retry skipped because the request's body, streamed without GetBody,
// was longer than the buffer limit: the error says so.
func ExampleErrBodyNotReplayable() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		conn, _, _ := http.NewResponseController(w).Hijack()
		conn.Close() // the connection is lost before an answer: worth a retry
	}))
	defer srv.Close()

	tr := retryhttp.New(noWait, retryhttp.WithBodyBufferLimit(4))
	defer tr.CloseIdleConnections()
	body := io.NopCloser(io.LimitReader(neverEnding('x'), 64)) // no GetBody
	req, _ := http.NewRequest(http.MethodPut, srv.URL, body)

	_, err := tr.RoundTrip(req)
	fmt.Println(errors.Is(err, retryhttp.ErrBodyNotReplayable))
	// Output:
	// true
}

// neverEnding reads as an endless run of one byte.
type neverEnding byte

func (b neverEnding) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(b)
	}
	return len(p), nil
}
