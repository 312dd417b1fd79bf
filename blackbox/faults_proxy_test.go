package blackbox

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed2409de8f/retryhttp"
	"github.com/seed2409de8f/retryhttp/internal/testkit"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// connectProxy is an HTTP proxy that opens CONNECT tunnels, after refusing
// the first refusals of them with status.
type connectProxy struct {
	ln       net.Listener
	status   int
	refusals int64
	connects atomic.Int64
	wg       sync.WaitGroup
}

func newConnectProxy(t *testing.T, status int, refusals int64) *connectProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &connectProxy{ln: ln, status: status, refusals: refusals}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(func() {
		ln.Close()
		p.wg.Wait()
	})
	return p
}

func (p *connectProxy) url() *url.URL { return &url.URL{Scheme: "http", Host: p.ln.Addr().String()} }

func (p *connectProxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.tunnel(c)
		}()
	}
}

// tunnel answers one CONNECT: a refusal, or a tunnel to its target for as
// long as both ends keep it open.
func (p *connectProxy) tunnel(c net.Conn) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second)) // bounded, whatever the test does
	req, err := http.ReadRequest(bufio.NewReader(c))
	if err != nil || req.Method != http.MethodConnect {
		return
	}
	if p.connects.Add(1) <= p.refusals {
		fmt.Fprintf(c, "HTTP/1.1 %d %s\r\nContent-Length: 0\r\n\r\n", p.status, http.StatusText(p.status))
		return
	}
	up, err := net.Dial("tcp", req.Host)
	if err != nil {
		_, _ = io.WriteString(c, "HTTP/1.1 502 Bad Gateway\r\n\r\n")
		return
	}
	defer up.Close()
	_ = up.SetDeadline(time.Now().Add(10 * time.Second))
	_, _ = io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n")
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, up); done <- struct{}{} }()
	<-done // one end closed: close both, and wait for the other copy
	c.Close()
	up.Close()
	<-done
}

// proxiedTransport is a transport whose base reaches srv (HTTPS) through
// proxy's tunnels.
func proxiedTransport(t *testing.T, srv *testkit.CountingServer, proxy *connectProxy) *retryhttp.Transport {
	base := srv.Client().Transport.(*http.Transport).Clone()
	base.Proxy = http.ProxyURL(proxy.url())
	t.Cleanup(base.CloseIdleConnections)
	return testkit.NewTransport(t, testkit.NoDelay, retryhttp.WithTransport(base))
}

func TestRefusedTunnelRetriedForEveryMethod(t *testing.T) {
	// A refused CONNECT never reached the server: a POST is retried as
	// after a refused connection.
	for _, status := range []int{http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout} {
		for _, method := range []string{http.MethodGet, http.MethodPost} {
			t.Run(http.StatusText(status)+"/"+method, func(t *testing.T) {
				srv := testkit.StartServer(t, func(_ int64, w http.ResponseWriter, r *http.Request) {
					body, _ := io.ReadAll(r.Body)
					_, _ = w.Write(body)
				}, true, nil)
				proxy := newConnectProxy(t, status, 1)
				tr := proxiedTransport(t, srv, proxy)

				res, err := tr.RoundTrip(testkit.NewRequest(t, method, srv.URL, strings.NewReader("payload")))
				require.NoError(t, err)

				assert.Equal(t, http.StatusOK, res.StatusCode)
				assert.Equal(t, "payload", testkit.ReadAll(t, res))
				assert.EqualValues(t, 2, proxy.connects.Load(), "refused, then opened")
				assert.EqualValues(t, 1, srv.Attempts.Load(), "the server saw the request once")
			})
		}
	}
}

func TestForbiddenTunnelNotRetried(t *testing.T) {
	// A 403 to CONNECT is the proxy's policy, not a passing failure.
	srv := testkit.StartServer(t, testkit.Always(200), true, nil)
	proxy := newConnectProxy(t, http.StatusForbidden, 10)
	tr := proxiedTransport(t, srv, proxy)

	res, err := tr.RoundTrip(testkit.NewRequest(t, http.MethodGet, srv.URL, nil))

	assert.Nil(t, res)
	require.Error(t, err)
	assert.EqualValues(t, 1, proxy.connects.Load())
	assert.Zero(t, srv.Attempts.Load())
}
