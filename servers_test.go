package retryhttp_test

import (
	"bufio"
	"crypto/sha256"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// rawServer is an HTTP/1.1 server written on a raw net.Listener, for the
// faults httptest cannot produce. It reads each request whole, records the
// SHA-256 of its body, and answers with the reply chosen for that request's
// number (1 for the first). Closing it closes every connection and waits for
// its goroutines.
type rawServer struct {
	ln       net.Listener
	choose   func(n int64) reply
	requests atomic.Int64
	conns    atomic.Int64

	mu   sync.Mutex
	sums [][sha256.Size]byte
	open map[net.Conn]struct{}
	wg   sync.WaitGroup
}

// reply writes the answer to one request on c and reports whether c may
// serve another request.
type reply func(c *net.TCPConn) bool

func newRawServer(t *testing.T, choose func(n int64) reply) *rawServer {
	t.Helper()
	return newRawServerAt(t, "127.0.0.1:0", choose)
}

// newRawServerAt is newRawServer listening on addr.
func newRawServerAt(t *testing.T, addr string, choose func(n int64) reply) *rawServer {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	require.NoError(t, err)
	s := &rawServer{ln: ln, choose: choose, open: map[net.Conn]struct{}{}}
	s.wg.Add(1)
	go s.serve()
	t.Cleanup(s.close)
	return s
}

func (s *rawServer) url() string { return "http://" + s.ln.Addr().String() }

func (s *rawServer) serve() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.conns.Add(1)
		s.mu.Lock()
		s.open[c] = struct{}{}
		s.mu.Unlock()
		s.wg.Add(1)
		go s.serveConn(c.(*net.TCPConn))
	}
}

func (s *rawServer) serveConn(c *net.TCPConn) {
	defer s.wg.Done()
	defer func() {
		c.Close()
		s.mu.Lock()
		delete(s.open, c)
		s.mu.Unlock()
	}()
	br := bufio.NewReader(c)
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		body, err := io.ReadAll(req.Body)
		if err != nil {
			return
		}
		s.mu.Lock()
		s.sums = append(s.sums, sha256.Sum256(body))
		s.mu.Unlock()
		if !s.choose(s.requests.Add(1))(c) {
			return
		}
	}
}

// close stops accepting, closes every connection and waits for the
// goroutines of the server.
func (s *rawServer) close() {
	s.ln.Close()
	s.mu.Lock()
	for c := range s.open {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// received returns the checksums of the request bodies received so far.
func (s *rawServer) received() [][sha256.Size]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([][sha256.Size]byte(nil), s.sums...)
}

// head is the status line and headers of a response with a body of n bytes.
func head(status, n int) string {
	return fmt.Sprintf("HTTP/1.1 %d %s\r\nContent-Length: %d\r\nContent-Type: application/octet-stream\r\n\r\n",
		status, http.StatusText(status), n)
}

// replyWith answers status with body, keeping the connection.
func replyWith(status int, body []byte) reply {
	return func(c *net.TCPConn) bool {
		_, err := io.WriteString(c, head(status, len(body))+string(body))
		return err == nil
	}
}

// replyReset resets the connection (RST, not FIN) without answering.
func replyReset(c *net.TCPConn) bool {
	_ = c.SetLinger(0)
	return false
}

// replyResetMidHeader sends part of the response headers, then resets the
// connection.
func replyResetMidHeader(c *net.TCPConn) bool {
	_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: text/pl")
	time.Sleep(10 * time.Millisecond) // let the client read the start
	_ = c.SetLinger(0)
	return false
}

// replyCloseMidHeader sends part of the response headers, then closes the
// connection cleanly (FIN).
func replyCloseMidHeader(c *net.TCPConn) bool {
	_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: text/pl")
	return false
}

// replyCutBody declares a body of 1000 bytes, sends 100 and closes the
// connection.
func replyCutBody(status int) reply {
	return func(c *net.TCPConn) bool {
		_, _ = io.WriteString(c, head(status, 1000)+string(payload(100)))
		return false
	}
}

// replyNever answers nothing and holds the connection until the client, or
// the server's close, ends it.
func replyNever(c *net.TCPConn) bool {
	_, _ = io.Copy(io.Discard, c)
	return false
}

// replySlowHeaders sends the response headers one byte every step, then the
// body.
func replySlowHeaders(step time.Duration, body []byte) reply {
	return func(c *net.TCPConn) bool {
		h := head(http.StatusOK, len(body))
		for i := range len(h) {
			if _, err := io.WriteString(c, h[i:i+1]); err != nil {
				return false
			}
			time.Sleep(step)
		}
		_, err := c.Write(body)
		return err == nil
	}
}

// replyTrickle sends the headers at once, then the body one byte every step.
func replyTrickle(status int, body []byte, step time.Duration) reply {
	return func(c *net.TCPConn) bool {
		if _, err := io.WriteString(c, head(status, len(body))); err != nil {
			return false
		}
		for i := range body {
			time.Sleep(step)
			if _, err := c.Write(body[i : i+1]); err != nil {
				return false
			}
		}
		return true
	}
}

// refusedAddr returns a loopback address nobody listens on.
func refusedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// countingTransport counts the attempts that reach the base transport.
type countingTransport struct {
	http.RoundTripper
	attempts atomic.Int64
}

func (c *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	c.attempts.Add(1)
	return c.RoundTripper.RoundTrip(req)
}
