package integrations

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/seed2409de8f/retryhttp"
)

// BenchmarkStreamedBodyFirstByte measures the time from the start of a
// request whose body is streamed (an io.Pipe, no GetBody: a proxy's
// outbound request, an upload read from a socket) to the arrival of the
// body's first bytes at the server, through the transport and through bare
// net/http on the same base. The body's writer sends its first bytes, then
// waits for the server to have read them before it ends the body, as a
// slow client does. Run with
//
//	cd bench/integrations && go test -run '^$' -bench StreamedBodyFirstByte -benchtime 2000x -count 5
//
// ttfb-ns/op is the time to first byte; ns/op is that of the whole
// request; B/op and allocs/op compare the memory of both. Before the
// transport streamed such bodies, it read them to the end before sending:
// this benchmark then waits forever (the writer waits for the server).
func BenchmarkStreamedBodyFirstByte(b *testing.B) {
	first := make(chan time.Time, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		buf := make([]byte, 5)
		if _, err := io.ReadFull(r.Body, buf); err == nil {
			first <- time.Now()
		}
		_, _ = io.Copy(io.Discard, r.Body)
	}))
	defer srv.Close()
	base := &http.Transport{MaxIdleConnsPerHost: 4}
	defer base.CloseIdleConnections()
	stacks := []struct {
		name string
		tr   http.RoundTripper
	}{
		{"bare", base},
		{"retryhttp", retryhttp.New(retryhttp.WithTransport(base), ownBudget())},
	}
	for _, st := range stacks {
		b.Run(st.name, func(b *testing.B) {
			var total time.Duration
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				pr, pw := io.Pipe()
				req, _ := http.NewRequest(http.MethodPost, srv.URL, struct{ io.ReadCloser }{pr})
				start := time.Now()
				done := make(chan struct{})
				go func() {
					defer close(done)
					_, _ = io.WriteString(pw, "first")
					total += (<-first).Sub(start)
					_, _ = io.WriteString(pw, " and the rest")
					pw.Close()
				}()
				res, err := st.tr.RoundTrip(req)
				<-done
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
			}
			b.ReportMetric(float64(total.Nanoseconds())/float64(b.N), "ttfb-ns/op")
		})
	}
}
