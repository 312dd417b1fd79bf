package breaker

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// exampleRequest returns a GET of http://example.test/.
func exampleRequest(t *testing.T) *http.Request {
	t.Helper()
	return httptest.NewRequest(http.MethodGet, "http://example.test/", nil)
}

// allow is s.Allow(req), which must let req through.
func allow(t *testing.T, s *Set, req *http.Request) Ticket {
	t.Helper()
	tk, ok, host := s.Allow(req)
	require.True(t, ok, "refused by the circuit of %s", host)
	return tk
}

// manualClock is a Clock whose time moves only with advance.
type manualClock struct {
	mu sync.Mutex
	at time.Time
}

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.at
}

func (c *manualClock) advance(d time.Duration) {
	c.mu.Lock()
	c.at = c.at.Add(d)
	c.mu.Unlock()
}
